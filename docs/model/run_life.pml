/*
 * The life of a run, as a Promela model checked exhaustively by spin
 * (docs/architecture.md, "The model of a run's life"; tests/foundation/test_run_model.py).
 *
 * It models the intended design of issue 34 (docs/architecture.md, the life of a run):
 * one clock (PostgreSQL's now() decides what is due), fenced leases (every claim and every
 * take-back writes a new lease_token; every write a worker makes is conditional on its
 * token), heartbeats, the sweeper, retries kept in the database, cancel and job deletion.
 * Every transition is one SQL statement (or one transaction) of apps/executions: its name
 * in a comment, and the correspondence table in docs/architecture.md. A transaction is an
 * `atomic` block: PostgreSQL's row locks (FOR UPDATE [SKIP LOCKED], a conditional UPDATE's
 * row lock) serialize the statements that touch one row, so their interleavings are the
 * interleavings of whole statements.
 *
 * Bounds (what "exhaustively" covers). Two configurations, each checked whole; every bound
 * can be raised with -D at `spin -a` time (the state space grows fast):
 *   "every fault" (the defaults)          "two runs" (-DNR=2 -DMAXATT=1 -DMAXRECLAIM=0
 *                                                     -DMAXDUP=0 -DMAXCRASH=0)
 *   NR          1  occurrence of one job   2  occurrences, due at DB times 1 and 2
 *   MAXATT      2  attempts (one retry)    1  attempt
 *   MAXRECLAIM  1  take-back, then a       0  the first take-back fails the run
 *                  second one fails the run   (LEASE_MAX_RECLAIMS)
 *   MAXDUP      1  duplicate message       0
 *   MAXCRASH    1  worker dies             0
 *   both:  2 workers; the DB clock runs 0..TMAX = 3 (seconds), a retry waits BACKOFF = 1;
 *          a process clock runs SKEW = 1 s ahead of the database's (read only by the
 *          -DPROCESS_CLOCK / -DSCHEDULER_SKEW variants: the design reads none);
 *          lease tokens 0..MAXATT + 2*(MAXRECLAIM+1) per run (asserted below TOKMAX = 16);
 *          every publish may be lost; at most QCAP = 2 messages of a run wait in the
 *          broker, delivered in any order; one cancel; the job may be deleted (then its
 *          runs purged) at any point.
 *   Lease expiry is not timed: a running run's lease may lapse at any moment (any pause
 *   of its worker, any heartbeat lost), which over-approximates every real timing; the
 *   sweeper's "published long ago" is "its message is gone" (or, once, "still waiting").
 *
 * Invariants (assert):
 *   I1 at most one outcome per (run, attempt)                    [record, take-back]
 *   I2 no change by a superseded token: a write lands only for the worker whose claim
 *      is the run's current one (ghost `holder`, kept apart from the token)  [record, heartbeat]
 *   I3 nothing fires before it is due by the DB clock (scheduled_for, next_attempt_at)
 *   I4 every occurrence ends final or is waiting for its retry: checked in every
 *      quiescent state (spin's `timeout`: nothing else can move, the clock at TMAX)
 *   I5 a second delivery of a run only after a lease of it expired (or its previous
 *      attempt was recorded as a retry); the same webhook-id by construction: it is the
 *      execution's id, and an occurrence has one row (unique constraint, ON CONFLICT)
 *
 * Variants (the test builds each and expects a violation):
 *   -DNO_TOKEN_CHECK   the recording UPDATE checks only status = 'running' (the code of
 *                      before issue 34): a superseded worker's result lands (I2/I1)
 *   -DPROCESS_CLOCK    scheduler and worker decide due-ness with their own clock, SKEW
 *                      ahead: a run fires early (I3)
 *   -DNO_TAKE_BACK     the sweeper never takes an expired lease back: a dead worker's run
 *                      stays running for ever (I4; shows the quiescence check is not vacuous)
 *   -DSCHEDULER_SKEW   only the scheduler's clock decides (too early); the worker's claim
 *                      refuses a run not due by the DB clock: no violation
 */

#ifndef NR
#define NR 1
#endif
#ifndef MAXATT
#define MAXATT 2
#endif
#define NW 2
#ifndef TMAX
#define TMAX 3
#endif
#define SKEW 1
#define BACKOFF 1
#ifndef MAXRECLAIM
#define MAXRECLAIM 1
#endif
#ifndef MAXDUP
#define MAXDUP 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#define QCAP 2                /* messages of one run the queue may hold */
#define TOKMAX 16

#define SCHED(o) ((o) + 1)        /* scheduled_for of occurrence o, on the DB clock */
/* when run r's next attempt is due: scheduled_for, or a retry's next_attempt_at */
#define DUE(r) (next_at[r] > SCHED(r) -> next_at[r] : SCHED(r))

/* execution.status (apps.executions.models.Execution.Status) */
#define NONE      0   /* no row yet */
#define QUEUED    1
#define RUNNING   2
#define SUCCEEDED 3
#define DEAD      4   /* dead/failed: the last attempt failed, or the lease was lost too often */
#define CANCELLED 5
#define GONE      6   /* deleted by the purge of a deleted job */

#define FINAL(s) ((s) == SUCCEEDED || (s) == DEAD || (s) == CANCELLED || (s) == GONE)

/* which clock decides what is due */
#ifdef PROCESS_CLOCK
#define SCHED_CLOCK  (now + SKEW)
#define WORKER_CLOCK (now + SKEW)
#else
#ifdef SCHEDULER_SKEW
#define SCHED_CLOCK  (now + SKEW)
#else
#define SCHED_CLOCK  now
#endif
#define WORKER_CLOCK now
#endif

#ifdef NO_TOKEN_CHECK
#define HELD(r, tok) (status[r] == RUNNING)
#else
#define HELD(r, tok) (status[r] == RUNNING && token[r] == (tok))
#endif

#if NR == 1
#define FOR_ROWS(M) M(0)
#elif NR == 2
#define FOR_ROWS(M) M(0) M(1)
#elif NR == 3
#define FOR_ROWS(M) M(0) M(1) M(2)
#endif

/* --- the database ---------------------------------------------------------------------- */
byte now = 0;                 /* PostgreSQL's now() */
bool job_exists = 1;          /* the jobs_job row */
byte next_occ = 0;            /* jobs_jobdue.next_run_at, as the index of the next occurrence */
byte status[NR];              /* executions_execution, one row per occurrence (unique) */
byte attempt[NR];             /* .attempt: attempts recorded */
byte token[NR];               /* .lease_token */
byte next_at[NR];             /* .next_attempt_at (0: null) */
bool published[NR];           /* .published_at is not null */
bool expired[NR];             /* .lease_expires_at < now() */
byte reclaims[NR];            /* .lease_reclaims */

/* --- the broker ------------------------------------------------------------------------ */
byte msgs[NR];                /* the plan's queue, as a bag: messages (execution ids) per run;
                                 unordered, so every delivery order the broker may pick */
bool topub[NR];               /* committed by the scheduler, not published yet */
byte dups = 0;

/* --- ghosts: what the receiver and an observer know ------------------------------------- */
byte holder[NR];              /* the worker (1..NW) whose claim is the run's current one */
byte outcomes[NR * MAXATT];   /* outcomes recorded per (run, attempt) */
byte excuses[NR];             /* 1 + leases taken back + retries recorded - requests sent:
                                 the deliveries the receiver may still see of the run (I5) */
bool crashed[NW + 1];         /* crashed[w]: worker w died (index 0 unused) */
byte crashes = 0;

/* publish after commit (publishing.py): the message may be lost */
#define PUBLISH(r) \
    if \
    :: msgs[r] < QCAP -> msgs[r]++ \
    :: true -> skip /* lost: broker down, process killed after the commit */ \
    fi

/* --- the scheduler (apps.executions.scheduling.tick, sweeper.due_retries) ---------------------- */

/* publishing.py: publish after the claim transaction committed */
#define SCHED_PUBLISH(r) :: atomic { topub[r] -> topub[r] = 0; PUBLISH(r) }

/* sweeper.due_retries (the scheduler's every tick): UPDATE ... SET published_at = now()
   WHERE status = 'queued' AND published_at IS NULL AND next_attempt_at <= now()
   (SELECT ... FOR UPDATE SKIP LOCKED), then publish */
#define DUE_RETRY(r) :: atomic { status[r] == QUEUED && !published[r] && next_at[r] <= SCHED_CLOCK -> \
    published[r] = 1; PUBLISH(r) }

active proctype Scheduler() {
end_scheduler:
    do
    /* scheduler.claim_due: one transaction of
         SELECT ... FROM jobs_jobdue WHERE next_run_at <= now() FOR UPDATE SKIP LOCKED (JOIN jobs_job);
         INSERT INTO executions_execution ...   (ScheduledRunsInsert; a row already there undoes
           the transaction, and the claim runs again with ON CONFLICT DO NOTHING)
         UPDATE jobs_jobdue SET next_run_at = v.next_run_at ...         (ADVANCE_JOBS) */
    :: atomic { job_exists && next_occ < NR && SCHED(next_occ) <= SCHED_CLOCK ->
        do
        :: next_occ < NR && SCHED(next_occ) <= SCHED_CLOCK ->
            if
            :: status[next_occ] == NONE ->   /* unique (job, scheduled_for, trigger) */
                status[next_occ] = QUEUED; published[next_occ] = 1;
                excuses[next_occ] = 1; topub[next_occ] = 1
            :: else -> skip                  /* the careful claim's ON CONFLICT DO NOTHING */
            fi;
            next_occ++
        :: else -> break
        od }
    FOR_ROWS(SCHED_PUBLISH)
    FOR_ROWS(DUE_RETRY)
    od
}

/* --- the sweeper (apps.executions.scheduling.sweeper) ------------------------------------------------ */

/* sweeper.stale: a queued run published long ago whose message is lost is published
   again (UPDATE ... SET published_at = now() WHERE status = 'queued' AND published_at < ...).
   "long ago" is time passing: enabled once the message is gone; and once per run while
   a message still waits (a duplicate). */
#define REPUBLISH(r) \
    :: atomic { status[r] == QUEUED && published[r] && msgs[r] == 0 -> PUBLISH(r) } \
    :: atomic { status[r] == QUEUED && published[r] && msgs[r] == 1 && dups < MAXDUP -> dups++; PUBLISH(r) }

/* sweeper.recover_expired_leases: UPDATE ... SET status = 'queued', lease_token =
   lease_token + 1, lease_reclaims = lease_reclaims + 1, published_at = now()
   WHERE status = 'running' AND lease_expires_at < now(); past LEASE_MAX_RECLAIMS the run
   fails instead (error_kind 'lease_lost'): no loop re-sends a run forever. */
#ifdef NO_TAKE_BACK
#define TAKE_BACK(r)
#else
#define TAKE_BACK(r) :: atomic { status[r] == RUNNING && expired[r] -> \
    token[r]++; expired[r] = 0; holder[r] = 0; excuses[r]++; \
    if \
    :: reclaims[r] < MAXRECLAIM -> reclaims[r]++; status[r] = QUEUED; published[r] = 1; PUBLISH(r) \
    :: else -> status[r] = DEAD; \
        outcomes[r * MAXATT + attempt[r]]++; assert(outcomes[r * MAXATT + attempt[r]] <= 1) \
    fi }
#endif

active proctype Sweeper() {
end_sweeper:
    do
    FOR_ROWS(REPUBLISH)
    FOR_ROWS(TAKE_BACK)
    od
}

/* --- time: the DB clock, and leases lapsing ------------------------------------------------ */

/* lease_expires_at < now(): the holder's heartbeat did not come in time (paused, slow,
   dead, cut off from PostgreSQL). Any running run may lapse at any moment. */
#define LAPSE(r) :: atomic { status[r] == RUNNING && !expired[r] -> expired[r] = 1 }

active proctype Clock() {
end_clock:
    do
    :: atomic { now < TMAX -> now++ }
    FOR_ROWS(LAPSE)
    od
}

/* --- workers (apps.executions.worker.batch, recording) ----------------------------------------- */

#define RECEIVE(k) :: atomic { msgs[k] > 0 -> r = k; msgs[k]-- }

proctype Worker(byte w) {
    byte r, tok, att;
end_idle:
    do
    :: if   /* a message arrives (of any run with one waiting) */
       FOR_ROWS(RECEIVE)
       fi;
        /* queries.CLAIM: UPDATE executions SET status = 'running', lease_token = lease_token + 1,
           lease_expires_at = now() + LEASE FROM (SELECT ... WHERE status = 'queued' AND
           scheduled_for <= now() AND (next_attempt_at IS NULL OR next_attempt_at <= now())
           FOR UPDATE SKIP LOCKED), jobs_job j WHERE j.id = e.job_id  (a deleted job: no claim).
           The request follows the claim, so a claim on time is a request on time (I3). */
        atomic {
            if
            :: status[r] == QUEUED && job_exists && SCHED(r) <= WORKER_CLOCK && next_at[r] <= WORKER_CLOCK ->
                assert(DUE(r) <= now);                                          /* I3 */
                token[r]++; assert(token[r] < TOKMAX);
                tok = token[r]; status[r] = RUNNING; expired[r] = 0; holder[r] = w;
                att = attempt[r] + 1
            :: else -> r = 0   /* duplicate, stale, cancelled, gone, or not due: nothing */
            fi
        }
        if
        :: tok == 0 -> skip
        :: else ->
            /* deliver (cronsvc.delivery): the request goes out with webhook-id = the
               execution's id, which is one row per occurrence (unique constraint) */
            atomic {
                assert(excuses[r] > 0);                                         /* I5 */
                excuses[r]--
            }
            if
            :: atomic { crashes < MAXCRASH -> crashes++; crashed[w] = 1 }; goto end_dead   /* the worker dies */
            :: skip
            fi;
            /* queries.RENEW_LEASES (the heartbeat, while the request is in flight):
               UPDATE ... SET lease_expires_at = now() + LEASE
               WHERE status = 'running' AND lease_token = v.lease_token */
            do
            :: atomic { status[r] == RUNNING && token[r] == tok && expired[r] -> assert(holder[r] == w); expired[r] = 0 }
            :: break
            od;
            /* recording.record_attempts, one transaction:
                 queries._FINISH: UPDATE executions SET status, attempt, next_attempt_at =
                   now() + retry_in ... WHERE e.status = 'running' AND e.lease_token = v.lease_token
                 queries.INSERT_UNMOVED_ATTEMPTS for the others (a superseded attempt: history
                   only), UPDATE_JOB_HEALTH and the outcome hooks for the moved ones only */
            atomic {
                if
                :: HELD(r, tok) ->
                    assert(holder[r] == w);                                     /* I2 */
                    outcomes[r * MAXATT + att - 1]++;
                    assert(outcomes[r * MAXATT + att - 1] <= 1);                /* I1 */
                    attempt[r] = att; expired[r] = 0; holder[r] = 0;
                    if
                    :: status[r] = SUCCEEDED                                    /* the request succeeded */
                    :: att < MAXATT ->                                          /* failed: a retry */
                        status[r] = QUEUED; published[r] = 0;
                        next_at[r] = now + BACKOFF; excuses[r]++
                    :: att >= MAXATT -> status[r] = DEAD                        /* failed, no attempt left */
                    fi
                :: else -> skip   /* superseded, cancelled or gone: the attempt is history only */
                fi;
                r = 0; tok = 0; att = 0
            }
        fi
    od;
end_dead:
    r = 0; tok = 0; att = 0
}

/* --- cancel and job deletion -------------------------------------------------------------- */

/* cancelling.cancel: UPDATE executions SET status = 'cancelled', lease_expires_at = NULL,
   next_attempt_at = NULL WHERE id = %s AND status IN ('queued', 'running') */
#define CANCEL(r) :: atomic { status[r] == QUEUED || status[r] == RUNNING -> \
    status[r] = CANCELLED; holder[r] = 0; expired[r] = 0 }

active proctype Canceller() {
    if
    FOR_ROWS(CANCEL)
    :: skip   /* nobody cancels */
    fi
}

/* purging: DELETE FROM executions WHERE id = ANY(%s) (the deleted job's runs, in batches) */
#define PURGE(r) :: atomic { status[r] != NONE && status[r] != GONE -> \
    status[r] = GONE; holder[r] = 0; expired[r] = 0 }

active proctype Deleter() {
    if
    :: skip -> goto kept   /* the job stays */
    /* job deletion (apps.executions.purging): DELETE FROM jobs_job; INSERT deleted job */
    :: job_exists = 0
    fi;
end_purge:
    do
    FOR_ROWS(PURGE)
    od;
kept:
    skip
}

/* --- I4: in a quiescent state every occurrence is final or waiting for its retry ---------- */
#define ENDED(r) assert(FINAL(status[r]) \
    || (status[r] == QUEUED && next_at[r] > now) \
    || (status[r] == NONE && (!job_exists || SCHED(r) > now)));

active proctype Quiescence() {
    timeout ->
    atomic { assert(now == TMAX); FOR_ROWS(ENDED) }
}

init {
    atomic { run Worker(1); run Worker(2) }
}
