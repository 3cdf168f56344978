import json

from evals.bfcl import load_category

FUNCTION = {
    "name": "weather.get",
    "description": "Current weather.",
    "parameters": {
        "type": "dict",
        "required": ["city"],
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "fahrenheit"},
            "days": {"type": "integer", "default": 1},
        },
    },
}


def test_function_schemas_become_json_schema_and_keep_their_defaults(tmp_path):
    """What leaving an optional argument out means is part of the function a model is shown, as in
    a user's own tool schema: BFCL's defaults stay, only its type names are translated."""
    question = [[{"role": "user", "content": "Weather in Oslo?"}]]
    case = {"id": "c1", "question": question, "function": [FUNCTION]}
    (tmp_path / "BFCL_v4_live_simple.json").write_text(json.dumps(case))
    (tmp_path / "possible_answer").mkdir()
    gold = {"id": "c1", "ground_truth": [{"weather.get": {"city": ["Oslo"]}}]}
    (tmp_path / "possible_answer" / "BFCL_v4_live_simple.json").write_text(json.dumps(gold))

    [loaded] = load_category(tmp_path, "live_simple")
    parameters = loaded.tools[0]["function"]["parameters"]
    assert parameters["type"] == "object"
    assert parameters["properties"]["unit"]["default"] == "fahrenheit"
    assert parameters["properties"]["days"] == {"type": "integer", "default": 1}
