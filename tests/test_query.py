"""The search language (query.py) and every backend answering it: qualifiers, free text over
id, command and last error, counts; `queuectl list --query`."""

from __future__ import annotations

import json

import pytest
from store_helpers import NOW, claim, settle

from queuectl_tui.errors import InvalidInput
from queuectl_tui.models import JobState, Outcome
from queuectl_tui.query import JobQuery, parse_query
from queuectl_tui.store import Store

from helpers import RunCli, spec

HOUR = 3_600_000


def test_qualifiers_quotes_and_free_text_are_read() -> None:
    query = parse_query('state:dead,failed queue:emails exit:1,137 error:"disk quota" x "a b"', NOW)
    assert query == JobQuery(
        (JobState.DEAD, JobState.FAILED),
        ("emails",),
        (1, 137),
        None,
        "disk quota",
        None,
        ("x", "a b"),
    )
    assert parse_query("since:2h", NOW).since == NOW - 2 * HOUR
    assert parse_query("since:2026-12-01", NOW).since == 1_796_083_200_000
    assert parse_query("image:tag redis:6379", NOW).text == ("image:tag", "redis:6379")
    assert parse_query('"stat:dead"', NOW).text == ("stat:dead",)  # quoted: text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stat:dead", "did you mean 'state:'?"),
        ("state:zombie", "unknown state 'zombie'"),
        ("exit:x", "exit: takes exit codes"),
        ("since:soon", "since: takes an age"),
        ("error:", "'error:' needs a value"),
        ('"open', "a quote is not closed"),
        ("queue:bad/name", "queue:"),
    ],
)
def test_bad_searches_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_query(text, NOW)


def _seed(store: Store) -> None:
    for index, output in enumerate(("Disk quota exceeded on /a", "disk QUOTA exceeded on /b")):
        store.enqueue(spec(id=f"backup-{index}", command="backup", max_retries=0), 3, NOW)
        job = claim(store, now=NOW + HOUR)
        settle(store, job, Outcome.FAILED, NOW + HOUR + 1, 7, output=output, error="exit code 7")
    store.enqueue(spec(id="other-dead", command="x", max_retries=0), 3, NOW)
    job = claim(store, now=NOW + HOUR)
    settle(store, job, Outcome.FAILED, NOW + HOUR + 2, 2, output="refused", error="exit code 2")
    store.enqueue(spec(id="deploy-web", command="./deploy --app web"), 3, NOW)
    store.enqueue(spec(id="mail-1", command="send-mail", queue="emails"), 3, NOW)


def _ids(store: Store, text: str) -> list[str]:
    query = parse_query(text, NOW + 2 * HOUR)
    found = sorted(job.id for job in store.list_jobs(limit=100, query=query))
    assert store.count_jobs(query) == len(found)
    return found


@pytest.mark.parametrize("text_index", [False, True], ids=["scan", "text-index"])
def test_every_backend_answers_the_same_searches(store: Store, text_index: bool) -> None:
    store.set_text_index(text_index)  # built before the jobs: kept by every write after
    _seed(store)
    assert _ids(store, 'error:"disk quota"') == ["backup-0", "backup-1"]  # any case
    assert _ids(store, "state:dead exit:2") == ["other-dead"]
    assert _ids(store, "exit:7,2") == ["backup-0", "backup-1", "other-dead"]
    assert _ids(store, "queue:emails") == ["mail-1"]
    assert _ids(store, "state:pending,dead DEPLOY") == ["deploy-web"]
    assert _ids(store, '"exit code 2"') == ["other-dead"]  # free text finds the last error
    assert _ids(store, "since:90m") == ["backup-0", "backup-1", "other-dead"]
    assert _ids(store, "100%_") == []  # LIKE's own characters are text
    assert _ids(store, "nothing-like-it") == []
    pending = store.list_jobs(JobState.PENDING, limit=10, query=parse_query("web", NOW))
    assert [job.id for job in pending] == ["deploy-web"]


def test_the_text_index_finds_what_a_scan_finds_through_every_change(store: Store) -> None:
    _seed(store)
    texts = ["deploy", "QUOTA", "exit code", "mail-1", "ab", "-w", '"--app web"', "100%_"]
    scanned = {text: _ids(store, text) for text in texts}
    store.set_text_index(True)  # built from the jobs there are
    assert store.text_index()
    assert {text: _ids(store, text) for text in texts} == scanned
    store.enqueue(spec(id="deploy-api", command="./deploy --app api"), 3, NOW)
    assert _ids(store, "deploy") == ["deploy-api", "deploy-web"]
    job = claim(store, worker="w9", now=NOW + HOUR)  # the oldest pending: deploy-web
    settle(store, job, Outcome.FAILED, NOW + HOUR + 3, 1, output="x", error="exit code 1: boom")
    assert _ids(store, "boom") == [job.id]  # a last error written later is found
    assert store.delete([job.id], NOW + HOUR + 4, None) == [job.id]
    assert _ids(store, "boom") == [] and _ids(store, "deploy") == ["deploy-api"]
    store.set_text_index(True)  # again: nothing changes
    assert _ids(store, "deploy") == ["deploy-api"]
    store.set_text_index(False)
    assert not store.text_index()
    assert _ids(store, "deploy") == ["deploy-api"]  # by a scan again


def test_worker_finds_running_jobs(store: Store) -> None:
    store.enqueue(spec(id="running"), 3, NOW)
    claim(store, worker="vm-2:1")
    assert _ids(store, "worker:VM-2") == ["running"]


def test_list_query_on_the_cli(run_cli: RunCli, db_path) -> None:
    from queuectl_tui.store import open_store

    with open_store(str(db_path)) as store:
        _seed(store)
    found = run_cli("list", "--query", 'state:dead error:"disk quota"', "--json")
    assert found.returncode == 0, found.stderr
    assert sorted(job["id"] for job in json.loads(found.stdout)) == ["backup-0", "backup-1"]
    counted = run_cli("list", "-Q", "exit:7")
    assert "2 jobs match the search." in counted.stderr
    none = run_cli("list", "-Q", "nothing-like-it", "-o", "table")
    assert none.stdout.strip() == "No jobs match the search."
    bad = run_cli("list", "-Q", "stat:dead")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "Error: unknown qualifier 'stat:'; did you mean 'state:'? (quote it to search for the text)"
    )


def test_search_index_on_the_cli(run_cli: RunCli) -> None:
    run_cli("enqueue", json.dumps({"id": "deploy-web", "command": "./deploy --app web"}))
    assert "by reading every job" in run_cli("search-index").stdout
    built = run_cli("search-index", "on")
    assert built.returncode == 0 and "through the trigram index now" in built.stdout
    assert "through the trigram index" in run_cli("search-index", "status").stdout
    found = json.loads(run_cli("list", "--query", "app web", "--json").stdout)
    assert [job["id"] for job in found] == ["deploy-web"]
    wrong = run_cli("search-index", "maybe")
    assert wrong.returncode == 2 and "say on, off or status" in wrong.stderr
    assert run_cli("search-index", "off").returncode == 0
    audit = json.loads(run_cli("audit", "--json").stdout)
    assert [e["subject"] for e in audit if e["action"] == "search-index"] == ["off", "on"]
