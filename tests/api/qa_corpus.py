"""A tiny corpus with one known answer, for the question-answering tests."""

DOCS = {
    "zephyr-release.txt": (
        b"Zephyr 4.2 release notes.\n\nZephyr 4.2 was released on 12 March 2026. It adds support for the "
        b"QX-7 humidity sensor and fixes the memory leak in the radio driver."
    ),
    "otters.txt": b"Sea otters hold hands while they sleep so that they do not drift apart. Dens are holts.",
    "owls.txt": b"Owls fly silently because the leading edges of their feathers have soft fringes.",
}
QUESTION = "When was Zephyr 4.2 released?"
