"""How many files and lines a reader opens to read each component's forward computation.

The counting rule (issue 50): a component's module plus every kerasseq module
it imports, transitively (imports inside functions included), with the
argument checks of `kerasseq/_validation.py` left aside; lines are `wc -l`
lines. Prints a Markdown table, the one in docs/design.md ("Reading a
component"), with the targets beside the measured numbers.

    .venv/bin/python benchmarks/component_lines.py [--check]

`--check` exits with status 1 when a component is over its target.
"""

import argparse
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCLUDED = {"kerasseq._validation"}

# component: (module, file target, line target)
COMPONENTS = {
    "TransformerDecoderBlock": ("kerasseq.layers.transformer_decoder_block", 6, 900),
    "CrossAttention": ("kerasseq.layers.cross_attention", 3, 500),
    "CausalSelfAttention": ("kerasseq.layers.causal_self_attention", 3, 500),
    "GRUDecoder": ("kerasseq.layers.gru_decoder", 5, 700),
    "LSTMEncoder": ("kerasseq.layers.lstm_encoder", 2, 300),
    "BahdanauAttention": ("kerasseq.layers.bahdanau_attention", 2, 250),
}


def module_path(module):
    base = os.path.join(ROOT, *module.split("."))
    if os.path.isfile(base + ".py"):
        return base + ".py"
    if os.path.isfile(os.path.join(base, "__init__.py")):
        return os.path.join(base, "__init__.py")
    return None


def kerasseq_imports(module):
    """The kerasseq modules `module` imports, anywhere in its file."""
    with open(module_path(module), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "kerasseq" and module_path(name):
                found.add(name)
    return found


def closure(module):
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen or current in EXCLUDED:
            continue
        seen.add(current)
        todo.extend(kerasseq_imports(current))
    return sorted(seen)


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def measure():
    rows = []
    for name, (module, file_target, line_target) in COMPONENTS.items():
        modules = closure(module)
        lines = sum(count_lines(module_path(m)) for m in modules)
        rows.append((name, len(modules), lines, file_target, line_target, modules))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--files", action="store_true", help="list each component's files")
    args = parser.parse_args(argv)
    rows = measure()
    print("| component | files | lines | target files | target lines |")
    print("|---|---:|---:|---:|---:|")
    for name, files, lines, file_target, line_target, _ in rows:
        print(f"| {name} | {files} | {lines:,} | ≤ {file_target} | ≤ {line_target:,} |")
    if args.files:
        for name, *_, modules in rows:
            print(f"{name}: {', '.join(modules)}")
    missed = [row[0] for row in rows if row[1] > row[3] or row[2] > row[4]]
    if missed:
        print("over target:", ", ".join(missed), file=sys.stderr)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
