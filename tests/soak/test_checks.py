"""The soak's judge, on made-up data: it must catch a lost, a doubled and a stuck run,
an unknown webhook-id and an unexplained repeat, or a passing soak proves nothing."""

from datetime import datetime, timedelta, timezone

from soak import chaos, checks

T0 = datetime(2027, 1, 1, tzinfo=timezone.utc)


def execution(job, at, status="succeeded", id=None, trigger="schedule"):
    return {"id": id or f"{job}-{at:%S}", "job_id": job, "scheduled_for": at, "trigger": trigger, "status": status}


def run_occurrences(executions, next_run_at=T0 + timedelta(seconds=30)):
    findings = checks.Findings()
    checks.check_occurrences(findings, {"j": (T0, 10, next_run_at)}, executions)
    return findings.checks[0]


def test_one_row_per_due_occurrence_passes():
    rows = [execution("j", T0 + timedelta(seconds=s)) for s in (0, 10, 20)]
    assert run_occurrences(rows).ok


def test_a_lost_occurrence_fails():
    check = run_occurrences([execution("j", T0 + timedelta(seconds=s)) for s in (0, 20)])
    assert not check.ok and "lost: 1" in check.detail


def test_a_doubled_or_stray_occurrence_fails():
    rows = [execution("j", T0 + timedelta(seconds=s)) for s in (0, 10, 10, 20)]
    assert "doubled: 1" in run_occurrences(rows).detail
    rows = [execution("j", T0 + timedelta(seconds=s)) for s in (0, 10, 20, 30)]
    assert not run_occurrences(rows).ok


def test_manual_runs_do_not_count_as_occurrences():
    rows = [execution("j", T0 + timedelta(seconds=s)) for s in (0, 10, 20)]
    rows.append(execution("j", T0 + timedelta(seconds=5), trigger="manual"))
    assert run_occurrences(rows).ok


def test_stuck_runs_fail():
    findings = checks.Findings()
    checks.check_final(findings, [execution("j", T0), execution("j", T0, status="running")], {"succeeded"})
    assert not findings.ok and "stuck (queued or running after the drain): 1" in findings.checks[0].detail


def requests_check(requests, faults, executions=None, attempts=(), reclaims=None):
    findings = checks.Findings()
    executions = executions or [execution("j", T0, id="e1")]
    checks.check_requests(findings, requests, executions, list(attempts), faults, reclaims=reclaims)
    return {c.name.split(" only after")[0]: c for c in findings.checks}, findings


RESENT = "a run is sent again"


def attempt(number, superseded=False):
    return {"execution_id": "e1", "number": number, "response_status": 200, "superseded": superseded}


def test_unknown_webhook_ids_fail():
    result, _ = requests_check([{"id": "nope", "attempt": "1", "at": 100.0}], [])
    assert not result["every request carries a known webhook-id"].ok


def test_without_take_back_records_a_repeat_is_explained_only_by_a_fault_while_it_was_in_flight():
    repeat = [{"id": "e1", "attempt": "1", "at": 100.0}, {"id": "e1", "attempt": "1", "at": 130.0}]
    kill = {"fault": "SIGKILL worker1", "kind": "worker", "at": 102.0, "until": 105.0}
    assert requests_check(repeat, [kill])[0][RESENT].ok
    assert kill["repeats"] == 1
    long_before = dict(kill, at=50.0)
    assert not requests_check(repeat, [long_before])[0][RESENT].ok
    scheduler_kill = dict(kill, kind="scheduler", fault="SIGKILL scheduler1")
    assert not requests_check(repeat, [scheduler_kill])[0][RESENT].ok


def test_a_repeat_under_a_new_attempt_number_is_still_a_repeat():
    # two requests, one attempt of the run's own recorded, no lease ever taken back: the
    # second request (attempt 2, one second after a kill) is a doubled run
    requests = [{"id": "e1", "attempt": "1", "at": 100.0}, {"id": "e1", "attempt": "2", "at": 103.0}]
    kill = {"fault": "SIGKILL worker1", "kind": "worker", "at": 101.0, "until": 104.0}
    result, findings = requests_check(requests, [kill], attempts=[attempt(2)], reclaims={})
    assert not result[RESENT].ok and "unexplained: 1" in result[RESENT].detail
    assert findings.tally["doubled"] == 1


def test_a_repeat_is_excused_by_a_lease_taken_back_and_only_as_often():
    requests = [{"id": "e1", "attempt": "1", "at": t} for t in (100.0, 120.0, 140.0)]
    result, findings = requests_check(requests, [], attempts=[attempt(1), attempt(1, superseded=True)],
                                      reclaims={"e1": 1})
    assert not result[RESENT].ok  # 3 requests, 1 own attempt, 1 take-back
    result, findings = requests_check(requests, [], attempts=[attempt(1)], reclaims={"e1": 2})
    assert result[RESENT].ok and findings.tally["superseded"] == 2


def test_retries_are_the_runs_own_attempts():
    requests = [{"id": "e1", "attempt": str(n), "at": 100.0 + n} for n in (1, 2, 3)]
    result, _ = requests_check(requests, [], attempts=[attempt(1), attempt(2), attempt(3)], reclaims={})
    assert result[RESENT].ok


def test_an_early_request_fails():
    findings = checks.Findings()
    due = T0 + timedelta(seconds=60)
    runs = [execution("j", due, id="e1")]
    checks.check_early(findings, [{"id": "e1", "attempt": "1", "at": due.timestamp() + 0.01}], runs)
    assert findings.ok and findings.tally["early"] == 0
    checks.check_early(findings, [{"id": "e1", "attempt": "1", "at": due.timestamp() - 23}], runs)
    assert not findings.ok and "up to 23.00 s early" in findings.checks[-1].detail
    assert "early 1" in checks.tally_line(findings)


def test_usage_must_equal_attempts():
    findings = checks.Findings()
    checks.check_usage(findings, {"UsageMonth": 10, "UsageDay": 9}, 10)
    assert not findings.ok
    findings = checks.Findings()
    checks.check_usage(findings, {"UsageMonth": 10, "UsageDay": 10}, 10)
    assert findings.ok


def test_the_chaos_plan_hits_every_fault_kind_even_when_short():
    for seed in range(20):
        events = chaos.plan(seed, 90, schedulers=2, workers=2)
        kills = {e.target.rstrip("0123456789") for e in events if e.action == "kill"}
        assert kills == {"worker", "scheduler"}
        assert [e.action for e in events].count("redis") == 1
        assert [e.action for e in events].count("postgres") == 1
        stop = next(e for e in events if e.action == "stop")
        cont = next(e for e in events if e.action == "cont")
        assert cont.at - stop.at > chaos.CLAIM_IDLE_SECONDS
        assert all(e.at <= 90 for e in events)


def test_the_plan_is_reproducible_from_its_seed():
    assert chaos.plan(7, 600, 2, 2) == chaos.plan(7, 600, 2, 2)
    kills = [e.at for e in chaos.plan(7, 600, 2, 2) if e.action == "kill"]
    assert all(20 <= b - a <= 60 for a, b in zip(kills, kills[1:]))


def test_a_late_run_is_billed_to_the_last_fault_before_it_arrived():
    # (due, lag, arrival) in seconds; faults at 100 (a kill) and 160 (a Redis restart)
    first = {"at": 100.0, "until": 103.0}
    second = {"at": 160.0, "until": 162.0}
    lags = [
        (95.0, 9.0, 104.0),    # in flight at the first fault: its doing
        (130.0, 0.1, 130.1),   # on time
        (158.0, 12.0, 170.0),  # due just before the second fault, held up by it
    ]
    starts = [100.0, 160.0]
    assert checks._recovery(first, lags, 2.0, starts) == 4.0
    assert checks._recovery(second, lags, 2.0, starts) == 10.0


def test_a_poison_message_not_dead_lettered_fails():
    letters = [{"reason": "not JSON: Expecting value"}, {"reason": "unknown task: x"}]
    findings = checks.Findings()
    checks.check_dead_letters(findings, 2, letters)
    checks.check_dead_letters(findings, 3, letters)
    assert [c.ok for c in findings.checks] == [True, False]
    assert "pushed: 3, dead letters: 2 (not JSON 1, unknown task 1)" in findings.checks[1].detail


def test_the_plan_holds_redis_full_for_a_while_and_sends_poison_once():
    events = chaos.plan(seed=3, duration=90, schedulers=2, workers=2)
    actions = [e.action for e in events]
    assert actions.count("poison") == 1 and actions.count("oom") == 1
    (start,) = [e.at for e in events if e.action == "oom"]
    (end,) = [e.at for e in events if e.action == "oom_end"]
    assert end - start == chaos.OOM_SECONDS and end < 90 - 8

def test_the_extra_faults_are_planned_only_when_asked_and_leave_the_rest_of_the_plan_alone():
    plain = chaos.plan(7, 90, 2, 2)
    both = chaos.plan(7, 90, 2, 2, extra=("clock", "lease"))
    assert [e for e in both if e.action not in ("skew", "unskew") and not e.target.startswith("worker")] == \
        [e for e in plain if not e.target.startswith("worker")]
    skew = next(e for e in both if e.action == "skew")
    unskew = next(e for e in both if e.action == "unskew")
    assert skew.target == unskew.target and skew.target.startswith("scheduler") and unskew.at > skew.at
    stop = next(e for e in both if e.action == "stop" and e.target.startswith("worker"))
    cont = next(e for e in both if e.action == "cont" and e.target == stop.target)
    assert cont.at - stop.at > 10  # past the soak's lease: 5 s timeout + 5 s margin
    assert not any(e.action in ("skew", "unskew") for e in chaos.plan(7, 90, 2, 2, extra=("lease",)))


def test_a_paused_scheduler_excuses_no_repeat_but_a_worker_paused_past_its_lease_may():
    repeat = [{"id": "e1", "attempt": "1", "at": 100.0}, {"id": "e1", "attempt": "1", "at": 130.0}]
    pause = {"fault": "SIGSTOP scheduler1", "kind": "scheduler-pause", "at": 102.0, "until": 120.0}
    assert not requests_check(repeat, [pause])[0][RESENT].ok
    assert requests_check(repeat, [dict(pause, kind="worker-pause", fault="SIGSTOP worker1")])[0][RESENT].ok


def test_a_job_left_behind_counts_as_lost():
    # Its next run (at 30 s) was never claimed: 25 s overdue when the jobs stopped at 55 s.
    rows = [execution("j", T0 + timedelta(seconds=s)) for s in (0, 10, 20)]
    findings = checks.Findings()
    stopped = (T0 + timedelta(seconds=55)).timestamp()
    checks.check_occurrences(findings, {"j": (T0, 10, T0 + timedelta(seconds=30))}, rows, disabled_at=stopped)
    assert not findings.ok and "lost: 1 (1 left behind" in findings.checks[0].detail
    findings = checks.Findings()  # overdue by less than LEFT_BEHIND_SECONDS: still on its way
    stopped = (T0 + timedelta(seconds=30 + checks.LEFT_BEHIND_SECONDS - 1)).timestamp()
    checks.check_occurrences(findings, {"j": (T0, 10, T0 + timedelta(seconds=30))}, rows, disabled_at=stopped)
    assert findings.ok


def test_the_issue_34_faults_are_planned_in_order_and_spare_the_paused_scheduler():
    for seed in range(20):
        for duration in (90, 600):
            events = chaos.plan(seed, duration, 2, 2, extra=chaos.EXTRA_FAULTS)
            actions = [e.action for e in events]
            assert all(e.at <= duration for e in events)
            arm, jump, unjump = (next(e for e in events if e.action == a) for a in ("jump_arm", "jump", "unjump"))
            assert arm.target == jump.target == unjump.target and arm.at < jump.at < unjump.at
            assert abs(unjump.at - jump.at - chaos.JUMP_FOR) < 1e-6
            paused = next(e for e in events if e.action == "stop" and e.target.startswith("scheduler"))
            assert jump.target != paused.target
            assert arm.at > next(e.at for e in events if e.action == "unskew")
            assert sorted(e.target for e in events if e.action == "cut") == ["postgres", "redis"]
            for service in ("postgres", "redis"):
                start = next(e for e in events if e.action == "blackhole" and e.target == service)
                end = next(e for e in events if e.action == "unblackhole" and e.target == service)
                assert abs(end.at - start.at - chaos.BLACKHOLE_SECONDS) < 1e-6
            assert actions.count("burst") == 1
    plain = chaos.plan(7, 90, 2, 2, extra=("clock", "lease"))
    more = chaos.plan(7, 90, 2, 2, extra=chaos.EXTRA_FAULTS)
    assert [e for e in more if e.action not in ("jump_arm", "jump", "unjump", "cut", "blackhole", "unblackhole",
                                                 "burst")] == plain


def test_a_clock_fault_whose_scheduler_hung_fails():
    fault = {"fault": "clock jump +1 h scheduler1", "kind": "clock", "target": "scheduler1", "at": 1.0,
             "log_from": 0, "log_until": None}
    working = ("clock skew: this scheduler's clock is +3600.002s off the database's\n"
               "scheduler tick: claimed=3 created=3\nscheduler tick: claimed=2 created=2\n")
    findings = checks.Findings()
    checks.check_clock_faults(findings, [dict(fault)], lambda name, start, end: working)
    assert findings.ok and "5 runs claimed" in findings.checks[0].detail
    for hung in ("", "clock skew: this scheduler's clock is +3600.002s off\nscheduler tick: claimed=0 created=0\n"):
        findings = checks.Findings()
        checks.check_clock_faults(findings, [dict(fault)], lambda name, start, end: hung)
        assert not findings.ok


def test_issue_34_faults_are_on_by_default_and_can_be_turned_off(monkeypatch):
    from soak.run import parse_args

    monkeypatch.delenv("SOAK_EXTRA_FAULTS", raising=False)
    assert parse_args(["--extra-faults", "none"]).extra_faults == ()
    assert parse_args(["--extra-faults", "lease,burst"]).extra_faults == ("lease", "burst")
    if chaos.faketime_library() is not None:
        assert parse_args([]).extra_faults == chaos.EXTRA_FAULTS
