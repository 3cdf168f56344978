from agents.qa.completeness import missing_things, named_things


def test_names_are_runs_of_capitalised_words_past_the_first_and_quoted_strings():
    task = "Find the documents about Kenneth Dyson and about Ramón Calderón; say what each is."
    assert named_things(task) == ["Kenneth Dyson", "Ramón Calderón"]
    assert named_things('Compare the Bank of England with "the Fed".') == ["the Fed", "Bank of England"]
    assert named_things("Who founded Rio de Janeiro in 1565?") == ["Rio de Janeiro", "1565"]
    assert named_things("what is the default block size?") == []


def test_an_answer_must_mention_each_of_two_or_more_named_things():
    task = "Find the documents about Kenneth Dyson and about Ramón Calderón; say what each is."
    assert missing_things(task, "Kenneth Dyson is a British academic.") == ["Ramón Calderón"]
    # half of a name's words is a mention (a surname alone), case and accents aside
    assert missing_things(task, "Dyson is an academic; Calderón was a club president.") == []
    assert missing_things(task, "Dyson is an academic; Calderon was a club president.") == []
    # one named thing: the refusal and claim checks judge such answers
    assert missing_things("Who is Kenneth Dyson?", "A British academic.") == []
