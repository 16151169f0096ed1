"""The seeded chaos plan and the driver that carries it out (and logs every step)."""

import glob
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

#: PostgreSQL aborts a claim transaction idle this long (apps/executions/scheduling/tick.py):
#: a scheduler paused longer than that must find its claim gone, not act on it.
CLAIM_IDLE_SECONDS = 10.0
#: How long Redis is held at maxmemory (noeviction: every write refused).
OOM_SECONDS = 6.0
#: The queue the soak's workers consume (the Procfile's enterprise worker) and what is
#: pushed onto it raw: not JSON, JSON that is no kombu message, and (through Celery) a
#: task nobody knows and the run task with arguments that are not execution ids.
POISON_QUEUE = "runs.enterprise"
POISON_RAW = (b"this is not json", b"\xff\xfe not even utf-8", b'{"execution_ids": ["poison"]}')
POISON_TASKS = (("apps.executions.tasks.no_such_task", [["poison"]]),
                ("apps.executions.tasks.run_executions", ["not a list of ids"]))

#: Issue 34's faults (``--extra-faults``, SOAK_EXTRA_FAULTS):
#: ``clock`` restarts a scheduler under libfaketime with its clock SKEW_SECONDS ahead for
#: SKEW_FOR seconds (it must fire nothing early);
#: ``jump`` restarts a scheduler under libfaketime on true time, then steps its wall clock
#: JUMP_SECONDS ahead while it runs and JUMP_FOR seconds later back (its monotonic clock
#: stays true, as when NTP steps a host's clock); a faked scheduler must see its skew and go
#: on claiming runs (checks.check_clock_faults), or the fault proved nothing;
#: ``lease`` pauses a worker (SIGSTOP) for LEASE_PAUSE_SECONDS, longer than a run's lease
#: (the soak's jobs: 5 s timeout + 5 s margin), then resumes it (its runs are taken back and
#: sent again once, never for ever);
#: ``proxy`` puts soak/proxy.py in front of PostgreSQL and of Redis for the platform's
#: processes and, on each, cuts every connection once and blackholes it for BLACKHOLE_SECONDS;
#: ``burst`` makes BURST_JOBS more jobs due at the same second (a long interval: one run each).
EXTRA_FAULTS = ("clock", "jump", "lease", "proxy", "burst")
SKEW_SECONDS, SKEW_FOR = 30, 30.0
JUMP_SECONDS, JUMP_FOR, JUMP_SETTLE = 3600, 20.0, 5.0
LEASE_PAUSE_SECONDS = 25.0
BLACKHOLE_SECONDS = 8.0
BURST_JOBS, BURST_INTERVAL = 300, 3600
#: The services behind a proxy: (the fault table's name, the driver's key).
PROXIED = (("PostgreSQL", "postgres"), ("Redis", "redis"))


@dataclass(order=True)
class Event:
    at: float  # seconds after the soak's start
    action: str = field(compare=False)  # kill, restart, stop, cont, redis, postgres, rabbitmq, skew, unskew,
    # jump_arm, jump, unjump, cut, blackhole, unblackhole, burst
    target: str = field(default="", compare=False)


def plan(seed, duration, schedulers, workers, rabbitmq=False, extra=()):
    """The timeline: a kill of a random scheduler or worker every 20–60 s (the first two a
    worker and a scheduler, so a short soak has one of each), each restarted 2–5 s later;
    one Redis restart, one SIGSTOP of a scheduler for longer than a claim may sit idle, one
    PostgreSQL restart, Redis held at maxmemory for OOM_SECONDS, a burst of poison messages
    on the workers' queue, and with ``rabbitmq`` (the broker) one RabbitMQ crash and restart
    near the end. A short soak scales the gaps down. The RabbitMQ event is drawn last, so
    a seed's plan is otherwise the same with either broker; the ``extra`` faults
    (EXTRA_FAULTS) after it, so a seed's plan is otherwise the same with or without them."""
    rng = random.Random(seed)
    warmup = min(30.0, 0.12 * duration)
    gap = (20.0, 60.0) if duration >= 300 else (duration / 8, duration / 4)
    victims = [f"scheduler{n}" for n in range(1, schedulers + 1)] + [f"worker{n}" for n in range(1, workers + 1)]
    firsts = [rng.choice([v for v in victims if v.startswith(kind)]) for kind in ("worker", "scheduler")]
    rng.shuffle(firsts)
    events, t = [], warmup
    while True:
        t += rng.uniform(*gap) if events else 0.0
        if t > duration - 8:
            break
        victim = firsts.pop(0) if firsts else rng.choice(victims)
        events.append(Event(t, "kill", victim))
        events.append(Event(t + rng.uniform(2, 5), "restart", victim))
    events.append(Event(rng.uniform(0.3, 0.4) * duration, "redis"))
    paused = paused_scheduler = rng.choice([v for v in victims if v.startswith("scheduler")])
    stop_at = 0.5 * duration
    events.append(Event(stop_at, "stop", paused))
    events.append(Event(stop_at + CLAIM_IDLE_SECONDS + 5, "cont", paused))
    events.append(Event(rng.uniform(0.65, 0.75) * duration, "postgres"))
    oom_at = rng.uniform(0.18, 0.25) * duration
    events.append(Event(oom_at, "oom"))
    events.append(Event(oom_at + OOM_SECONDS, "oom_end"))
    events.append(Event(rng.uniform(0.55, 0.6) * duration, "poison"))
    if rabbitmq:
        events.append(Event(rng.uniform(0.8, 0.88) * duration, "rabbitmq"))
    if "clock" in extra:
        skewed, at = rng.choice([v for v in victims if v.startswith("scheduler")]), rng.uniform(0.15, 0.25) * duration
        events += [Event(at, "skew", skewed), Event(at + SKEW_FOR, "unskew", skewed)]
    if "lease" in extra:
        paused, at = rng.choice([v for v in victims if v.startswith("worker")]), rng.uniform(0.55, 0.6) * duration
        events += [Event(at, "stop", paused), Event(at + LEASE_PAUSE_SECONDS, "cont", paused)]
    if "jump" in extra:  # not the scheduler paused mid-soak; after the skew is over
        schedulers = [v for v in victims if v.startswith("scheduler")]
        jumper = rng.choice([v for v in schedulers if v != paused_scheduler] or schedulers)
        skew_end = max((e.at for e in events if e.action == "unskew"), default=0.0)
        at = max(rng.uniform(0.6, 0.65) * duration, skew_end + JUMP_SETTLE + 1)
        events += [Event(at - JUMP_SETTLE, "jump_arm", jumper), Event(at, "jump", jumper),
                   Event(at + JUMP_FOR, "unjump", jumper)]
    if "proxy" in extra:
        for (_, service), (low, high) in zip(PROXIED, ((0.38, 0.42), (0.44, 0.48))):
            events.append(Event(rng.uniform(low, high) * duration, "cut", service))
        for (_, service), (low, high) in zip(PROXIED, ((0.78, 0.8), (0.82, 0.84))):
            at = rng.uniform(low, high) * duration
            events += [Event(at, "blackhole", service), Event(at + BLACKHOLE_SECONDS, "unblackhole", service)]
    if "burst" in extra:
        events.append(Event(burst_at(duration), "burst"))
    return sorted(events)


def burst_at(duration):
    """When the burst's jobs are all due: a whole second (their anchor), a third of the way in."""
    return float(round(0.33 * duration))


def faketime_library():
    """libfaketime's preload library (Debian's libfaketime), or None."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    return found[0] if found else None


def faketime_env(base_env, **settings):
    """The environment of a process whose wall clock libfaketime fakes (``settings``:
    FAKETIME or FAKETIME_TIMESTAMP_FILE...) while its monotonic clock stays true, with
    soak/faketime_site's time.sleep (see there why)."""
    site = str(Path(__file__).with_name("faketime_site"))
    path = base_env.get("PYTHONPATH")
    return {"LD_PRELOAD": faketime_library(), "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "PYTHONPATH": f"{site}:{path}" if path else site, **settings}


#: The services the driver restarts: (name in the fault table, what the restart does).
RESTARTS = {
    "redis": ("Redis", "queued messages are lost"),
    "postgres": ("PostgreSQL", "immediate stop: a crash"),
    "rabbitmq": ("RabbitMQ", "SIGKILL: a crash; what it confirmed comes back from its disk"),
}


class Driver:
    def __init__(self, processes, postgres, redis, log, rabbitmq=None, proxies=None, workdir=None):
        self.processes = {p.name: p for p in processes}
        self.services = {"postgres": postgres, "redis": redis, "rabbitmq": rabbitmq}
        self.proxies = proxies or {}  # {"postgres"/"redis": FaultProxy}
        self.workdir = workdir
        self.log = log
        self.stopped = set()
        self.jumping = set()  # schedulers from their clock jump's arming until it is over
        self.faults = []  # {"fault", "at", "until"}: wall-clock start and end of each fault
        self.unexpected_exits = []
        self.substitutes = {}  # planned victim -> the process killed in its place
        self.poison_sent = 0

    def run(self, events, started, duration):
        pending = list(events)
        while time.time() - started < duration:
            while pending and pending[0].at <= time.time() - started:
                self._do(pending.pop(0), started)
            self.watch(started)
            time.sleep(0.2)
        for event in pending:  # a SIGCONT or a restart the window cut short
            if event.action in ("cont", "restart"):
                self._do(event, started)

    def watch(self, started):
        """A process that died on its own (a crash loop after a restart, say) is an
        invariant failure: record it, then restart it so the soak goes on."""
        for process in self.processes.values():
            if not process.alive() and not process.expected_down:
                code = process.popen.returncode
                self.unexpected_exits.append((process.name, round(time.time() - started, 1), code))
                self.log(f"UNEXPECTED EXIT of {process.name} (code {code}); restarting it")
                process.start()

    def _do(self, event, started):
        now = time.time()
        offset = round(now - started, 1)
        if event.action == "kill":
            victim = self._victim(event.target)
            if victim is None:
                self.log(f"t={offset}s no {self.processes[event.target].kind} to kill (paused, or its clock "
                         "jump under way): this kill skipped")
                return
            self.substitutes[event.target] = victim.name
            victim.kill()
            self.faults.append({"fault": f"SIGKILL {victim.name}", "kind": victim.kind, "at": now, "until": None,
                                "target": victim.name})
            self.log(f"t={offset}s SIGKILL {victim.name}")
        elif event.action == "restart":
            process = self.processes[self.substitutes.pop(event.target, event.target)]
            if not process.alive():
                process.start()
                self._close(f"SIGKILL {process.name}")
                self.log(f"t={offset}s restarted {process.name}")
        elif event.action in RESTARTS:
            name, what = RESTARTS[event.action]
            if event.action == "redis" and self.services["rabbitmq"] is not None:
                what = "its counters are lost; the broker is RabbitMQ"
            self.log(f"t={offset}s restarting {name} ({what})")
            self.services[event.action].restart()
            self.faults.append({"fault": f"{name} restart", "kind": event.action, "at": now, "until": time.time()})
            self.log(f"t={round(time.time() - started, 1)}s {name} is back")
        elif event.action == "oom":
            self.services["redis"].hold_at_maxmemory()
            self.faults.append({"fault": "Redis at maxmemory", "kind": "oom", "at": now, "until": None})
            self.log(f"t={offset}s Redis held at maxmemory (noeviction: every write refused)")
        elif event.action == "oom_end":
            self.services["redis"].release_memory()
            self._close("Redis at maxmemory")
            self.log(f"t={offset}s Redis has memory again")
        elif event.action == "poison":
            self.poison_sent += self._send_poison()
            self.faults.append({"fault": "poison messages", "kind": "poison", "at": now, "until": time.time()})
            self.log(f"t={offset}s {self.poison_sent} poison messages pushed onto {POISON_QUEUE}")
        elif event.action == "stop":
            process = self.processes[event.target]
            process.signal(signal.SIGSTOP)
            self.stopped.add(process.name)
            self.faults.append({"fault": f"SIGSTOP {process.name}", "kind": f"{process.kind}-pause", "at": now, "until": None,
                                "target": process.name})
            self.log(f"t={offset}s SIGSTOP {process.name}")
        elif event.action == "cont":
            process = self.processes[event.target]
            process.signal(signal.SIGCONT)
            self.stopped.discard(process.name)
            self._close(f"SIGSTOP {event.target}")
            self.log(f"t={offset}s SIGCONT {process.name}")
        elif event.action in ("skew", "unskew"):
            process = self.processes[event.target]
            skew = event.action == "skew"
            process.overrides = faketime_env(process.env, FAKETIME=f"+{SKEW_SECONDS}s") if skew else {}
            process.kill()
            if skew:
                self.faults.append({"fault": f"clock +{SKEW_SECONDS} s {process.name}", "kind": "clock", "at": now,
                                    "until": None, "target": process.name, "log_from": process.log_size()})
            else:
                self._close(f"clock +{SKEW_SECONDS} s {process.name}", log_until=process.log_size())
            process.start()
            self.log(f"t={offset}s restarted {process.name} with its clock "
                     + (f"{SKEW_SECONDS} s ahead (libfaketime)" if skew else "true again"))

        elif event.action in ("jump_arm", "jump", "unjump"):
            self._jump(event, now, offset)
        elif event.action in ("cut", "blackhole", "unblackhole"):
            proxy, name = self.proxies[event.target], dict((k, n) for n, k in PROXIED)[event.target]
            if event.action == "cut":
                proxy.cut()
                self.faults.append({"fault": f"{name} connections cut", "kind": f"{event.target}-net", "at": now,
                                    "until": now})
                self.log(f"t={offset}s every connection to {name} reset (proxy)")
            elif event.action == "blackhole":
                proxy.blackhole()
                self.faults.append({"fault": f"{name} blackholed", "kind": f"{event.target}-net", "at": now,
                                    "until": None})
                self.log(f"t={offset}s {name} blackholed (proxy: accepts, never forwards)")
            else:
                proxy.restore()
                self._close(f"{name} blackholed")
                self.log(f"t={offset}s {name} reachable again (the blackholed connections reset)")
        elif event.action == "burst":
            self.faults.append({"fault": f"burst of {BURST_JOBS} runs due at once", "kind": "burst", "at": now,
                                "until": now})
            self.log(f"t={offset}s {BURST_JOBS} runs due at this second")

    def _jump(self, event, now, offset):
        """A running scheduler's wall clock stepped JUMP_SECONDS ahead and, JUMP_FOR seconds
        later, back (libfaketime re-reads its timestamp file; the monotonic clock stays true,
        as when NTP steps a host's clock)."""
        process = self.processes[event.target]
        stamp = self.workdir / f"faketime-{process.name}"
        fault = f"clock jump +{JUMP_SECONDS // 3600} h {process.name}"
        if event.action == "jump_arm":
            self.jumping.add(process.name)
            stamp.write_text("+0\n")
            process.overrides = faketime_env(process.env, FAKETIME_TIMESTAMP_FILE=str(stamp),
                                             FAKETIME_CACHE_DURATION="1")
            process.kill()
            process.start()
            self.log(f"t={offset}s restarted {process.name} under libfaketime, on true time")
        elif event.action == "jump":
            self.faults.append({"fault": fault, "kind": "clock", "at": now, "until": None, "target": process.name,
                                "log_from": process.log_size()})
            stamp.write_text(f"+{JUMP_SECONDS}\n")
            self.log(f"t={offset}s {process.name}'s clock jumped {JUMP_SECONDS} s ahead (running)")
        else:
            self.jumping.discard(process.name)
            stamp.write_text("+0\n")
            self._close(fault, log_until=process.log_size())
            self.log(f"t={offset}s {process.name}'s clock jumped back to true time (running)")

    def _send_poison(self):
        """Push the poison onto the workers' queue in the broker: raw bytes (RabbitMQ: a
        body that claims to be JSON) and, through Celery, tasks the worker must refuse."""
        from celery import Celery
        from kombu import Connection

        rabbitmq = self.services["rabbitmq"]
        url = rabbitmq.url if rabbitmq is not None else self.services["redis"].url
        with Connection(url, connect_timeout=5) as connection:
            if rabbitmq is None:
                client = self.services["redis"].client()
                for raw in POISON_RAW:
                    client.lpush(POISON_QUEUE, raw)
                client.close()
                raw_count = len(POISON_RAW)
            else:  # RabbitMQ frames every message: only its body can be garbage
                producer = connection.Producer()
                for raw in POISON_RAW[:1]:
                    producer.publish(raw, exchange="", routing_key=POISON_QUEUE, content_type="application/json",
                                     content_encoding="utf-8", serializer=None)
                raw_count = 1
            sender = Celery(broker=url, set_as_current=False)
            for name, args in POISON_TASKS:
                sender.send_task(name, args=args, queue=POISON_QUEUE, connection=connection)
        return raw_count + len(POISON_TASKS)

    def _victim(self, name):
        """The planned victim, unless it is paused, skewed or already down: then another of
        its kind, one with a faked clock rather than a paused one (a kill would cut a pause
        short; a faked scheduler comes back with its clock as faked). Never a scheduler
        whose clock jump is under way: its restart, slow on a loaded machine, could take
        the whole jump, and the jump's check would find it never ran. None when no process
        of the kind may be killed."""
        process = self.processes[name]
        if process.alive() and name not in self.stopped and not process.overrides:
            return process
        others = [p for p in self.processes.values() if p.kind == process.kind and p.alive()
                  and p.name not in self.stopped and p.name not in self.jumping]
        others.sort(key=lambda p: bool(p.overrides))
        if others:
            return others[0]
        return None if name in self.stopped or name in self.jumping else process

    def _close(self, fault, **extra):
        for record in reversed(self.faults):
            if record["fault"] == fault and record["until"] is None:
                record["until"] = time.time()
                record.update(extra)
                return
