"""The house's edges (docs/architecture.md): one execution algorithm in the executor, no migration on the run path,
stages that only load, call and write, and no record class that nothing reads."""

from __future__ import annotations

import ast
from pathlib import Path

import possym

SRC = Path(possym.__file__).parent
EXECUTOR = SRC / "experiment" / "executor.py"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _calls(node: ast.AST, name: str) -> int:
    """Calls of ``name`` (a function or a method) in ``node``."""
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Call)
               and (n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)) == name)


def test_the_executor_hands_every_unit_to_an_engine_in_one_loop_and_runs_a_units_stages_in_one_place():
    functions = _functions(_tree(EXECUTOR))
    mapping = [name for name, fn in functions.items() if _calls(fn, "map")]
    assert mapping == ["_run_units"], f"units go to an engine in one place, not in {mapping}"
    # run_stage on a run is called by the unit's function alone (and run_stage on the experiment's directory)
    callers = sorted(name for name, fn in functions.items() if _calls(fn, "run_stage") and name != "run_stage")
    assert callers == ["_experiment_stage", "_run_unit"], callers
    # and the engine that runs in this process calls the same function as every other
    assert _calls(functions["map"], "fn") == 1 and "Here" in {n.name for n in ast.walk(_tree(EXECUTOR))
                                                              if isinstance(n, ast.ClassDef)}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_no_module_but_possym_migrate_imports_the_migration_or_reads_an_earlier_layout():
    """Upgrading an earlier possym's directory is one command, run once (``possym migrate``); the run path refuses
    such a directory, naming it, and holds no compatibility branch (the values of keys added since, the tasks'
    upgrades of their saved sections)."""
    allowed = {SRC / "experiment" / "migrate.py", SRC / "cli" / "migrate.py"}
    importers = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if p not in allowed and any(m.startswith("possym.experiment.migrate") for m in _imports(p))]
    assert importers == [], f"the run path imports the migration: {importers}"
    readers = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if p not in allowed
               and any(isinstance(n, ast.Attribute) and n.attr == "upgrade" or isinstance(n, ast.Name)
                       and n.id == "SAVED_BEFORE_KEY" for n in ast.walk(_tree(p)))]
    assert readers == [], f"a compatibility branch outside the migration: {readers}"


# Where a stage runs and what it holds are the executor's (possym.experiment.run_stage): a stage only loads, calls a
# library function and writes, through the context it is handed (possym.stages.registry.StageContext).
EXECUTION_CALLS = {"torch_threads", "set_num_threads", "resolve_device", "writer_lock", "writing", "on_behalf_of"}


def _stage_modules() -> list[Path]:
    """The modules of possym.stages that declare a stage (``STAGE`` or ``STAGES``); the registry and the memo are
    the machinery that runs them."""
    def declares(path: Path) -> bool:
        return any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("STAGE", "STAGES")
                                                     for t in n.targets) for n in _tree(path).body)
    return sorted(p for p in (SRC / "stages").glob("*.py") if declares(p))


def test_no_stage_handles_its_threads_device_lock_or_settings_file():
    modules = _stage_modules()
    assert len(modules) >= 13, [p.name for p in modules]
    found = []
    for path in modules:
        tree = _tree(path)
        found += [f"{path.name}: imports {m}" for m in _imports(path) if m.split(".")[:2] in (["possym", "devices"],
                                                                                          ["possym", "locks"])]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in EXECUTION_CALLS:
                    found.append(f"{path.name}:{node.lineno}: calls {name}")
            elif isinstance(node, ast.Attribute) and node.attr in ("threads", "device") and \
                    isinstance(node.value, ast.Name) and node.value.id == "cfg":
                found.append(f"{path.name}:{node.lineno}: reads cfg.{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".json") \
                    and node.value.split("/")[-1] in ("settings.json", "dilution.json", "protocol.json"):
                found.append(f"{path.name}:{node.lineno}: writes {node.value}")
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                    node.target.id in ("threads", "device"):
                found.append(f"{path.name}:{node.lineno}: restates {node.target.id} (subclass Execution)")
    assert found == [], "a stage handles what the executor hands it:\n" + "\n".join(found)


# The calls that read a table's rows back into records (by field), and those that compute a record to write.
READERS = {"read_records", "read_records_text", "read", "from_csv", "records_of"}
# Record classes no file is read into, and why each is a class: code reads its rows by field as it computes them.
COMPUTED = {"TallyRecord": "possym.scores.dynamics computes it from the purity rows; Fig. 2C and 7 plot it by field"}


def _record_classes() -> list[str]:
    tree = _tree(SRC / "records.py")
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id == "Record" for b in n.bases)]


def test_every_record_class_is_read_by_the_library_and_a_table_it_only_writes_is_a_spec_line():
    """A record class owns a table's columns and parsing for code that reads its rows by field; a table the code
    writes and reads only as a frame is one spec line, its columns and types (``Artifact(name, columns=...)``)."""
    read: set[str] = set()
    for path in SRC.rglob("*.py"):
        if path.name == "records.py":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in READERS:
                    read |= {a.id for a in node.args if isinstance(a, ast.Name)}
                owner = getattr(node.func, "value", None)
                if name == "from_csv" and isinstance(owner, ast.Name):
                    read.add(owner.id)
    unread = [name for name in _record_classes() if name not in read and name not in COMPUTED]
    assert unread == [], f"record classes nothing reads (make each a spec line where it is written): {unread}"
