"""`import kerasseq` registers every serializable class with Keras.

Keras imports the module named in a `.keras` file by itself only for its own
packages (`keras`, `keras_hub`, ...): every other package registers its
classes when it is imported. So after the conventional

    import keras, kerasseq
    model = keras.models.load_model("model.keras")

any kerasseq model loads, in a fresh process that imported nothing else:
one built by `build_rnn_seq2seq` (compiled: tokenizers, loss, metric) and one
wired by hand from `LSTMEncoder`, `Bridge` and `GRUDecoder` with the
functional API. The command line's parser (`kerasseq_cli`) stays free of
TensorFlow: tests/test_cli.py checks `--help`.
"""

import ast
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np

import kerasseq

PACKAGE = pathlib.Path(kerasseq.__file__).parent


def _run(code, timeout=300):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _registered_classes_in_source():
    """`package>Name` of every class decorated with register_keras_serializable,
    read from the source files (not from the registry the test checks)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call)
                        and getattr(decorator.func, "attr", getattr(decorator.func, "id", ""))
                        == "register_keras_serializable"):
                    package = next((k.value.value for k in decorator.keywords
                                    if k.arg == "package"), "Custom")
                    names.add(f"{package}>{node.name}")
    return names


def test_import_kerasseq_registers_every_serializable_class():
    expected = _registered_classes_in_source()
    assert len(expected) >= 20 and "kerasseq>TransformerSeq2Seq" in expected, expected
    output = _run("import json, keras, kerasseq\n"
                  "print(kerasseq.export.export_translator.__module__, kerasseq.tflite.__name__,\n"
                  "      kerasseq.plotting.__name__)\n"
                  "print(json.dumps(sorted(keras.saving.get_custom_objects())))\n")
    reachable, output = output.split("\n", 1)
    # the modules outside the subpackages are attributes after `import kerasseq` too
    assert reachable.split() == ["kerasseq.export", "kerasseq.tflite", "kerasseq.plotting"]
    registered = set(output.strip().strip("[]").replace('"', "").split(", "))
    assert expected - registered == set()


def _hand_wired_model():
    from kerasseq.layers import Bridge, GRUDecoder, LSTMEncoder

    source = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    outputs, final_state = LSTMEncoder(vocab_size=12, embedding_dim=4, units=5)(source)
    initial_state = Bridge(units=6)(final_state)
    decoder_outputs = GRUDecoder(vocab_size=11, embedding_dim=4, units=6)(
        target_in, initial_state)
    if isinstance(decoder_outputs, (list, tuple)):  # (outputs, state)
        decoder_outputs = decoder_outputs[0]
    logits = keras.layers.Dense(11)(decoder_outputs)
    return keras.Model([source, target_in], logits)


def test_conventional_load_model_in_a_fresh_process(tmp_path):
    from kerasseq.data import TextTokenizer
    from kerasseq.models import build_rnn_seq2seq
    from kerasseq.training import (
        MaskedSparseCategoricalCrossentropy,
        MaskedTokenAccuracy,
    )

    keras.utils.set_random_seed(0)
    built = build_rnn_seq2seq(
        embedding_dim=4, units=6, attention="bahdanau",
        source_tokenizer=TextTokenizer.from_texts(["abc", "cab"], split="character"),
        target_tokenizer=TextTokenizer.from_texts(["xyz", "zyx"], split="character"))
    built.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
                  metrics=[MaskedTokenAccuracy()])
    wired = _hand_wired_model()
    source = np.array([[3, 4, 5, 0]], dtype="int32")
    target_in = np.array([[1, 4, 5]], dtype="int32")
    expected = {}
    for name, model in (("built", built), ("wired", wired)):
        model.save(tmp_path / f"{name}.keras")
        expected[name] = np.asarray(model([source, target_in]))
        np.save(tmp_path / f"{name}.npy", expected[name])
    code = f"""
import sys
import keras, kerasseq
import numpy as np
source = np.array([[3, 4, 5, 0]], dtype="int32")
target_in = np.array([[1, 4, 5]], dtype="int32")
for name in ("built", "wired"):
    model = keras.models.load_model({str(tmp_path)!r} + f"/{{name}}.keras")
    logits = np.asarray(model([source, target_in]))
    assert np.allclose(logits, np.load({str(tmp_path)!r} + f"/{{name}}.npy"), atol=1e-6), name
    print(name, type(model).__name__)
built = keras.models.load_model({str(tmp_path)!r} + "/built.keras")
print("loss", type(built.loss).__name__)
print("tokens", built.source_tokenizer.vocabulary)
"""
    out = _run(code)
    assert "built RNNSeq2Seq" in out and "wired Functional" in out, out
    assert "loss MaskedSparseCategoricalCrossentropy" in out, out
    assert "tokens ['a', 'b', 'c']" in out, out


def _module_level_imports():
    """`{module: {kerasseq modules it imports at module level}}`, read from the source."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imported = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level only
            if isinstance(node, ast.Import):
                imported.update((alias.name, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from package import submodule` imports the submodule; anything
                # else imported from a module is that module's
                imported.update((f"{node.module}.{alias.name}", node.module)
                                for alias in node.names)
        graph[name] = imported
    modules = set(graph)
    return {name: {submodule if submodule in modules else module
                   for submodule, module in pairs} & modules - {name}
            for name, pairs in graph.items()}


def test_no_import_circle_between_kerasseq_modules():
    """Module-level imports form no circle (functions may import lazily)."""
    graph = _module_level_imports()
    assert "kerasseq.translator" in graph and "kerasseq.decoding.contract" in graph
    state, stack = {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                circle = stack[stack.index(imported):] + [imported]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if imported not in state:
                visit(imported)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_lower_layers_import_no_higher_one():
    """The layering of docs/design.md: decoding, layers and data import no model,
    translator, export or command; the translator imports no model or export."""
    graph = _module_level_imports()
    higher = ("kerasseq.models", "kerasseq.translator", "kerasseq.translation",
              "kerasseq.export", "kerasseq.tflite")
    for module, imports in graph.items():
        lower = module.startswith(("kerasseq.decoding", "kerasseq.layers", "kerasseq.data",
                                   "kerasseq._"))
        if lower:
            assert not [m for m in imports if m.startswith(higher)], (module, imports)
        if module == "kerasseq.translator":
            assert not [m for m in imports if m.startswith(
                ("kerasseq.models", "kerasseq.export"))], imports


def test_one_address_per_public_class():
    """`SearchConfig` (and its error) and `Translator`: kerasseq's own modules import
    them from the module that defines them; the public addresses are the top level
    and, for the settings, `kerasseq.decoding`; no other module lists them."""
    defining = {"SearchConfig": "kerasseq.decoding.config",
                "SearchConfigError": "kerasseq.decoding.config",
                "Translator": "kerasseq.translator"}
    public = {"kerasseq", "kerasseq.decoding"}
    for path in [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "kerasseq_cli").glob("*.py")]:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in defining:
                        assert node.module == defining[alias.name], (module, node.module, alias.name)
            if (isinstance(node, ast.Assign) and module not in public
                    and any(getattr(target, "id", None) == "__all__" for target in node.targets)):
                listed = {element.value for element in node.value.elts}
                foreign = {name for name, home in defining.items() if home != module}
                assert not listed & foreign, (module, listed & foreign)


def test_cli_imports_no_private_kerasseq_module():
    """`kerasseq_cli` uses kerasseq's public names only: no `kerasseq._*` module,
    at module level or inside a function."""
    for path in (PACKAGE.parent / "kerasseq_cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            modules += ([f"{node.module}.{alias.name}" for alias in node.names]
                        if isinstance(node, ast.ImportFrom) and node.module else [])
            private = [name for name in modules
                       if name.startswith("kerasseq.") and any(
                           part.startswith("_") for part in name.split(".")[1:])]
            assert not private, (path.name, node.lineno, private)


def test_every_public_name_is_documented_on_a_page():
    """Each `__all__` of the package, and each public module of `kerasseq.__all__`
    has one, lists names that a page of docs/ (besides the design notes) uses."""
    pages = "\n".join(page.read_text(encoding="utf-8") for page in
                      (PACKAGE.parent / "docs").rglob("*.md") if page.name != "design.md")
    for name in kerasseq.__all__:
        module = getattr(kerasseq, name)
        if isinstance(module, type(kerasseq)):
            assert isinstance(getattr(module, "__all__", None), list), name
    listed = 0
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                    getattr(target, "id", None) == "__all__" for target in node.targets):
                names = [element.value for element in node.value.elts]
                listed += len(names)
                undocumented = [name for name in names
                                if not re.search(rf"\b{re.escape(name)}\b", pages)]
                assert not undocumented, (str(path.relative_to(PACKAGE.parent)), undocumented)
    assert listed > 100
