"""Error groups: the fingerprint (what is masked, what is kept), the store keeping it as failed
runs settle on every backend, and `queuectl dlq groups` / `dlq retry --group`."""

from __future__ import annotations

import json

from store_helpers import NOW, claim, settle

from queuectl_tui import control
from queuectl_tui.error_groups import fingerprint, last_output_line, mask
from queuectl_tui.models import JobState, Outcome, local_operator
from queuectl_tui.store import Store

from helpers import RunCli, spec


def test_what_differs_between_runs_is_masked_and_the_exit_kept() -> None:
    one = fingerprint(
        "exit code 1", "writing\nerror: quota exceeded on /data/u1/f.txt (uid 1001)\n"
    )
    two = fingerprint("exit code 1", "error: quota exceeded on /data/u22/g.txt (uid 17)")
    assert one == two == "exit code 1 · error: quota exceeded on <path> (uid <n>)"
    assert fingerprint("exit code 2", "error: quota exceeded on /x") != one
    assert fingerprint("killed by SIGKILL", "") == "killed by SIGKILL"
    assert fingerprint("timed out after 5 s", "") == "timed out after <n> s"
    assert mask("req 550e8400-e29b-41d4-a716-446655440000 at 2026-12-03T11:00:00Z") == (
        "req <id> at <time>"
    )
    assert mask("commit 5f3e2a1b9c8d7e6f and 0xdeadbeef") == "commit <hex> and <hex>"
    assert mask("worker vm:123-ab12:1 (pid 42) was lost") == "worker <worker> (pid <n>) was lost"
    assert last_output_line("[queuectl: 10 earlier bytes of output dropped]\n\n") == ""
    assert len(fingerprint("exit code 1", "x" * 1000)) == 200


def _die(store: Store, job_id: str, output: str, code: int = 1, at: int = 0) -> None:
    store.enqueue(spec(id=job_id, max_retries=0), 3, NOW + at)
    job = claim(store, now=NOW + at)
    settle(
        store, job, Outcome.FAILED, NOW + at + 10, code, output=output, error=f"exit code {code}"
    )


def test_dead_jobs_are_grouped_by_their_failure(store: Store) -> None:
    for index in range(3):
        _die(store, f"quota-{index}", f"disk quota exceeded on /data/{index}", at=index * 100)
    _die(store, "refused", "connection refused 10.0.0.1:5432", code=2, at=1000)
    store.enqueue(spec(id="retrying", max_retries=3), 3, NOW)
    job = claim(store)
    settle(
        store,
        job,
        Outcome.FAILED,
        NOW + 50,
        1,
        output="disk quota exceeded on /x",
        error="exit code 1",
    )
    groups = store.error_groups(JobState.DEAD)
    assert [(g.fingerprint, g.count, g.example) for g in groups] == [
        ("exit code 1 · disk quota exceeded on <path>", 3, "quota-2"),
        ("exit code 2 · connection refused <n>", 1, "refused"),
    ]
    assert (groups[0].first_at, groups[0].last_at) == (NOW + 10, NOW + 210)
    [failed] = store.error_groups(JobState.FAILED)
    assert (failed.count, failed.example) == (1, "retrying")
    assert store.error_group_ids(JobState.DEAD, groups[0].fingerprint) == [
        "quota-0",
        "quota-1",
        "quota-2",
    ]
    assert store.get("quota-0").error_group == groups[0].fingerprint
    report = control.retry_group(store, groups[0].fingerprint, local_operator("test"))
    assert sorted(report.done) == ["quota-0", "quota-1", "quota-2"]
    assert [g.count for g in store.error_groups(JobState.DEAD)] == [1]


def test_dlq_groups_and_retry_by_group(run_cli: RunCli, db_path) -> None:
    from queuectl_tui.store import open_store

    with open_store(str(db_path)) as store:
        for index in range(2):
            _die(store, f"quota-{index}", f"disk quota exceeded on /data/{index}", at=index)
    listed = run_cli("dlq", "groups", "--json")
    assert listed.returncode == 0, listed.stderr
    [group] = json.loads(listed.stdout)
    assert (group["count"], group["example"]) == (2, "quota-1")
    table = run_cli("dlq", "groups")
    assert "disk quota exceeded on <path>" in table.stdout
    retried = run_cli("dlq", "retry", "--group", group["fingerprint"])
    assert retried.returncode == 0 and "Retried 2 dead job(s)" in retried.stdout
    again = run_cli("dlq", "retry", "--group", group["fingerprint"])
    assert again.returncode == 1 and "no dead jobs in the error group" in again.stderr
    both = run_cli("dlq", "retry", "--all", "--group", "x")
    assert both.returncode == 2
