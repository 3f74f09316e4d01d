"""Isolation, property-based: every read path against an independent, set-based reference.

Generated worlds (tests/isolation_model.py, built by tests/isolation_world.py and checked by
tests/isolation_checks.py) hold look-alike scopes, principals with random
perms/groups/tiers, Units (plain and derived from objects), objects and queued jobs with random
ACLs, each carrying a unique secret marker. Through the real HTTP app, for every reader and
every path — units/:id (+ preview), search (both legs, filters), answer (hits, citations, text,
sentences, dropped, trace, the prompt the model sees), streaming answer (SSE), objects (GET,
Range, If-None-Match, HEAD, look-alike keys), jobs/:id, docs and units listings, usage — the
server must return exactly the readable set, no marker of anything else anywhere in the body,
and for what is invisible the same bytes as for what does not exist. The result cache is
exercised in both orders. Test-only mutation switches prove each path's check catches the
classic bugs (tests/isolation_mutations.py, injected by monkeypatch).

SCDB_ISOLATION_EXAMPLES sets the number of generated worlds (CI default 50);
SCDB_ISOLATION_REPORT=path writes the counts as JSON (bench/results/isolation.md).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from isolation_checks import ALL_PATHS, STATS, EchoLLM
from isolation_model import MemoEmbedder, worlds
from isolation_mutations import inject
from isolation_world import Harness, build

EXAMPLES = int(os.environ.get("SCDB_ISOLATION_EXAMPLES", "50"))


@pytest.fixture(scope="module")
def memo_embedder(embedder):
    return MemoEmbedder(embedder)


@pytest.fixture(scope="module")
def echo_llm():
    llm = EchoLLM()
    yield llm
    llm.httpd.shutdown()
    llm.httpd.server_close()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    path = os.environ.get("SCDB_ISOLATION_REPORT")
    if path:
        Path(path).write_text(json.dumps(dict(sorted(STATS.items())), indent=2) + "\n")


HARNESS: list[Harness] = []


def run_world(tmp: Path, spec: dict[str, Any], emb: Any, llm: EchoLLM, paths=ALL_PATHS) -> None:
    svc, world = build(tmp, spec, emb, llm.url)
    try:
        if not HARNESS:
            HARNESS.append(Harness(svc))
        HARNESS[0].check(svc, world, llm, paths, spec["patch"])
    finally:
        svc.close()
    shutil.rmtree(tmp, ignore_errors=True)  # kept only when a check failed (for debugging)
    STATS["worlds"] += 1
    STATS["principals"] += len(world.principals)
    STATS["requests_generated"] += len(world.requests)
    STATS["units"] += len(world.units)
    STATS["objects"] += len(world.objects)
    STATS["jobs"] += len(world.jobs)


# The full property (~1 s a world) runs in `make test`; the fast tier runs a few worlds of the
# same property so that an isolation break still fails there.
QUICK_EXAMPLES = min(EXAMPLES, 8)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=worlds())
def test_isolation_property(tmp_path_factory, memo_embedder, echo_llm, spec):
    t0 = time.perf_counter()
    run_world(tmp_path_factory.mktemp("iso"), spec, memo_embedder, echo_llm)
    STATS["seconds"] += round(time.perf_counter() - t0, 3)


@settings(
    max_examples=QUICK_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=worlds())
def test_isolation_property_quick(tmp_path_factory, memo_embedder, echo_llm, spec):
    saved = STATS.copy()  # the report counts the full property's worlds only
    try:
        run_world(tmp_path_factory.mktemp("isoq"), spec, memo_embedder, echo_llm)
    finally:
        STATS.clear()
        STATS.update(saved)


# Each injected bug (D-50) must be caught through each path it affects, on its own: a
# path whose check could not fail would show up here.
MUTATION_PATHS = [
    *(
        (m, path)
        for m in ("like_prefix", "ancestor")
        for path in sorted(ALL_PATHS - {"usage", "writes"})
    ),
    ("destroy_without_read", "units"),
    ("destroy_without_read", "writes"),
    ("add_any_group", "writes"),
    *(("cache_groups_only", path) for path in ("search", "answer", "stream")),
    # Caught only by the second round after a re-permission: proves that round is not idle.
    ("cache_no_generations", "search+answer+stream"),
]


@pytest.mark.slow
@pytest.mark.parametrize("mutation,path", MUTATION_PATHS)
def test_mutations_are_caught(
    tmp_path_factory, memo_embedder, echo_llm, monkeypatch, mutation, path
):
    caught = False

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        derandomize=True,  # the same worlds every run: a pass or fail is reproducible
        phases=[Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(spec=worlds())
    def prop(spec):
        paths = frozenset(path.split("+"))
        run_world(tmp_path_factory.mktemp("mut"), spec, memo_embedder, echo_llm, paths)

    inject(monkeypatch, mutation)
    saved = STATS.copy()  # the report counts the property's own worlds only
    try:
        prop()
    except AssertionError:
        caught = True
    except ExceptionGroup as group:  # several distinct failures
        caught = group.subgroup(AssertionError) is not None
    finally:
        monkeypatch.undo()
        STATS.clear()
        STATS.update(saved)
    assert caught, f"the {path} check did not catch the {mutation!r} bug"
