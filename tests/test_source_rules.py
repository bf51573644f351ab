"""Rules the whole source tree keeps: nothing unpickles code on load, the model package stays free
of training, data and CLI code, no module imports another that imports it back, only the tasks
compare task names, and modules stay short enough to read (functions: ruff's complexity rules,
configured in pyproject.toml)."""

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "vaswani"
TASK_NAMES = ("translate", "lm", "classify")


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str], root: Path = SRC) -> set[str]:
    """The vaswani modules `path` imports, at its top or inside functions: `from vaswani.x import
    y` counts as importing vaswani.x.y when that is a module, else vaswani.x."""
    found = set()
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                inner = f"{module}.{alias.name}"
                found.add(inner if inner in modules else module)
    return {name for name in found if name in modules}


def test_every_torch_load_is_weights_only():
    offenders = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"torch\.load\(", line) and "weights_only=True" not in line:
                offenders.append(f"{path.relative_to(SRC)}:{number}")
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


def test_the_model_never_imports_training_data_decoding_or_cli_code():
    pattern = re.compile(
        r"^\s*(from|import)\s+vaswani\.(train|data|decoding|cli|serve|tasks|run)\b", re.M
    )
    for path in (SRC / "model").rglob("*.py"):
        match = pattern.search(path.read_text(encoding="utf-8"))
        assert match is None, f"{path.name} imports {match.group(0).strip()}"


def test_modules_stay_short_enough_to_read():
    """No module over 500 lines: a longer one holds more than one idea (split it by stage or by
    concern, as `data/` and `train/` are)."""
    long_modules = [
        f"{path.relative_to(SRC)} ({lines})"
        for path in SRC.rglob("*.py")
        if (lines := path.read_text(encoding="utf-8").count("\n")) > 500
    ]
    assert not long_modules, f"modules over 500 lines: {long_modules}"


def test_no_module_imports_one_that_imports_it_back():
    """No import cycle, counting imports inside functions (which only hide one)."""
    paths = {module_name(path): path for path in SRC.rglob("*.py")}
    graph = {name: imported_modules(path, set(paths)) - {name} for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError(
                "import cycle: " + " -> ".join([*trail[trail.index(name) :], name])
            )
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_the_cycle_finder_sees_a_cycle_hidden_in_a_function(tmp_path):
    package = tmp_path / "vaswani"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from vaswani.b import f\n")
    (package / "b.py").write_text("def f():\n    from vaswani import a\n")
    modules = {"vaswani", "vaswani.a", "vaswani.b"}
    assert imported_modules(package / "a.py", modules, package) == {"vaswani.b"}
    assert imported_modules(package / "b.py", modules, package) == {"vaswani.a"}


def name_comparisons(text: str, names: tuple[str, ...] = TASK_NAMES) -> list[int]:
    """Lines of `text` that compare something with one of `names` (==, !=, in, not in), or that
    build a table keyed by them."""
    lines = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                elements = (
                    operand.elts
                    if isinstance(operand, ast.Tuple | ast.List | ast.Set)
                    else [operand]
                )
                if any(isinstance(e, ast.Constant) and e.value in names for e in elements):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and len(node.keys) > 1:
            keys = {key.value if isinstance(key, ast.Constant) else None for key in node.keys}
            if keys <= set(names):  # a table keyed by them (not the commands' table)
                lines.append(node.lineno)
    return lines


def test_only_the_tasks_compare_task_names():
    """What differs between translate, lm and classify is asked of the `Task` objects
    (`vaswani.tasks`), never decided by comparing a name."""
    offenders = [
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.rglob("*.py")
        if path.name != "tasks.py"
        for line in name_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"compare the Task instead of its name: {offenders}"


def test_the_task_rule_sees_comparisons_and_tables():
    text = 'if task == "lm": pass\nok = kind in ("translate",)\nTABLE = {"classify": 1, "lm": 2}\nCOMMANDS = {"translate": 1, "train": 2}\nx = "lm"\n'
    assert name_comparisons(text) == [1, 2, 3]


def test_files_vaswani_reads_from_directories_go_through_one_reader():
    """JSON and text files named inside run, data, checkpoint and model directories are read by
    vaswani.safe_io (read_json, read_text): a damaged one is one line naming the file and where,
    never a JSONDecodeError or UnicodeDecodeError. Parsing what is not a file is allowed: a
    request body, a flag's value, a tokenizer serialised in memory, a file of the package, a
    document's text (its format's reader has checked it and names the file in its errors)."""
    not_files = (
        "body.decode",
        "json.loads(value)",
        ".to_str()",
        "resources.files(",
        "loads(line)",
        "json.loads(document)",
    )
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "safe_io.py" and path.parent == SRC:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"json\.loads?\(|\.read_text\(", line) and not any(
                allowed in line for allowed in not_files
            ):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not offenders, "read these with vaswani.safe_io.read_json / read_text:\n" + "\n".join(
        offenders
    )


def test_only_the_format_records_know_a_format_by_its_extension():
    """What a file's extension says (its format, whether it is binary, tagged, a catalog) is
    asked of the one record of its format (`documents/formats.py`, `data/readers/`), never
    decided by comparing the extension elsewhere."""
    from vaswani.data import readers
    from vaswani.documents import formats

    registries = {SRC / "documents" / "formats.py", SRC / "data" / "readers" / "__init__.py"}
    extensions = (*readers.SUFFIXES, *formats.FORMATS)
    offenders = [
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.rglob("*.py")
        if path not in registries
        for line in name_comparisons(path.read_text(encoding="utf-8"), extensions)
    ]
    assert not offenders, f"ask the format's record instead of its extension: {offenders}"
    assert name_comparisons('if p.suffix in (".tmx", ".xlf"): pass\n', extensions) == [1]


def test_only_the_schedules_compare_schedule_names():
    """A schedule's traits (`knows_end`, `ending_at`) are asked of its object (`train/schedule.py`)."""
    names = ("inverse-sqrt", "linear", "wsd")
    offenders = [
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.rglob("*.py")
        if path.name != "schedule.py"
        for line in name_comparisons(path.read_text(encoding="utf-8"), names)
    ]
    assert not offenders, f"ask the Schedule instead of comparing its name: {offenders}"


def test_the_architecture_page_names_every_module():
    """docs/ARCHITECTURE.md's table names each module of src/vaswani by its path, so the map
    cannot fall behind the code."""
    page = (SRC.parents[1] / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.py)`", page))
    modules = {str(path.relative_to(SRC)) for path in SRC.rglob("*.py")}
    assert not modules - named, f"docs/ARCHITECTURE.md does not name: {sorted(modules - named)}"
    assert not named - modules - {"tests/test_source_rules.py"}, f"gone: {sorted(named - modules)}"


LAYERS = (
    # Imports run one way, down this list (docs/ARCHITECTURE.md): a module may import its own
    # layer and those above it, never one below. FRONTS are left out.
    ("errors", "safe_io", "progress", "config", "languages", "metrics", "device", "kernels"),
    ("model", "checkpoint", "loss"),
    ("data", "decoding"),
    ("tasks",),
    ("prepare", "run"),
    ("documents",),
    ("translation",),
    ("train", "evaluate", "backtranslate", "distill", "marian", "hub", "plot"),
    ("run_table", "export", "serve", "demo"),
    ("cli", "__main__"),
)


FRONTS = ("vaswani",)
"""The package's front, which only re-exports."""


def layer_of(module: str) -> int | None:
    """The index in LAYERS of a module's most specific entry (vaswani.data.tokenizer: data)."""
    parts = module.split(".")[1:]
    for size in range(len(parts), 0, -1):
        name = ".".join(parts[:size])
        for index, names in enumerate(LAYERS):
            if name in names:
                return index
    return None


def test_imports_never_run_back_up_a_layer():
    paths = {module_name(path): path for path in SRC.rglob("*.py")}
    unplaced = sorted(name for name in paths if name not in FRONTS and layer_of(name) is None)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"
    upward = [
        f"{name} -> {imported}"
        for name, path in sorted(paths.items())
        if name not in FRONTS
        for imported in sorted(imported_modules(path, set(paths)))
        if imported not in FRONTS and layer_of(imported) > layer_of(name)
    ]
    assert not upward, f"imports that run back up a layer: {upward}"


def test_the_layer_rule_sees_an_import_back_up():
    assert layer_of("vaswani.decoding.text") < layer_of("vaswani.translation.segment")
    assert layer_of("vaswani.prepare.vocab") > layer_of("vaswani.tasks") > layer_of("vaswani.data")


def public_functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions and methods whose name does not start with "_", outside classes that do."""
    found = []

    def visit(node: ast.AST, private: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, private or child.name.startswith("_"))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not private and not child.name.startswith("_"):
                    found.append(child)
                visit(child, True)  # a function's inner functions are its own business

    visit(tree, False)
    return found


PASSED_ON = {
    # `**name` that is passed on whole to what defines its keys, not a bag of options
    "cli/config_file.py add_argument": "argparse's own add_argument",
    "cli/fields.py settings_from": "a settings dataclass's fields",
    "config/architecture.py from_preset": "ModelConfig's fields (dataclasses.replace)",
    "config/training.py from_file": "TrainConfig's fields",
    "data/options.py from_file": "PrepareOptions' fields",
    "plot.py subplots": "matplotlib's subplots",
    "progress.py progress_bar": "tqdm's options",
}


def test_no_public_function_takes_more_than_six_parameters_or_a_keyword_bag():
    """A function at the limit wants a type that carries its parameters (DESIGN.md), not a
    `**options` bag."""
    over, bags = [], []
    for path in sorted(SRC.rglob("*.py")):
        for node in public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            args = node.args
            names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
            count = len([n for n in names if n not in ("self", "cls")])
            where = f"{path.relative_to(SRC)}:{node.lineno} {node.name}"
            if count > 6:
                over.append(f"{where} ({count})")
            if args.kwarg is not None and f"{path.relative_to(SRC)} {node.name}" not in PASSED_ON:
                bags.append(where)
    assert not over, f"public functions over 6 parameters: {over}"
    assert not bags, f"public functions taking **{'kwargs'}: {bags}"


def test_the_parameter_rule_counts_what_it_should():
    code = (
        "def f(a, b, c, d, e, f, g): pass\n"
        "def _g(a, b, c, d, e, f, g): pass\n"
        "class _F:\n    def forward(ctx, a, b, c, d, e, f): pass\n"
        "class K:\n    def m(self, a, b, c, d, e, f): pass\n"
    )
    assert [f.name for f in public_functions(ast.parse(code))] == ["f", "m"]


def test_no_two_modules_share_a_name():
    """A name says which module: not two metrics.py or two pipeline.py. The command line's
    modules are named by the commands (cli/serve.py runs serve/), and are left out."""
    seen: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "cli" or relative == Path("__init__.py"):
            continue
        name = relative.parent.name if path.name == "__init__.py" else path.stem
        if name != "__main__":
            seen.setdefault(name, []).append(str(relative))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"modules of one name: {twice}"


TYPED = {"engine", "model", "worker", "loaded"}
"""Parameters and fields whose type says what the code may call on them: never Any."""


def test_an_engine_a_model_or_a_worker_is_never_typed_any():
    loose = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.arg in TYPED:
                annotation = node.annotation
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                annotation = node.annotation if node.target.id in TYPED else None
            else:
                continue
            if isinstance(annotation, ast.Name) and annotation.id == "Any":
                loose.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not loose, f"typed Any: {loose}"
