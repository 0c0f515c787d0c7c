"""Runs every ```python example of README.md's "Python" section, each in a fresh namespace, so the
copy-paste examples stay true. Examples that import torch or transformers run where those are
installed; one marked "# needs a CUDA GPU" runs only where torch sees a GPU."""
import importlib.util
import pathlib
import re
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_examples():
    text = README.read_text()
    section = re.search(r"^## Python\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, "README.md has no '## Python' section"
    return re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)


def missing_requirement(code):
    """Why this example cannot run here, or None."""
    for module in ("torch", "transformers"):
        if re.search(rf"^\s*(import|from) {module}\b", code, re.M) and \
                importlib.util.find_spec(module) is None:
            return f"needs {module}"
    if "# needs a CUDA GPU" in code:
        import torch

        if not torch.cuda.is_available():
            return "needs a CUDA GPU"
    return None


EXAMPLES = python_examples()


def test_the_section_has_examples():
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs(index, tmp_path):
    code = EXAMPLES[index]
    reason = missing_requirement(code)
    if reason:
        pytest.skip(reason)
    # Import it as a real module from a file: torch.compile imports the module that holds a
    # compiled function's globals by name, so an exec() namespace without a module would not do.
    name = f"readme_example_{index + 1}"
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
