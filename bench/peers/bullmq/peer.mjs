// BullMQ job schedulers as a peer of cronsvc's scheduler (bench/bench_scheduler.py --peers).
//
//   node peer.mjs <redis url> <schedules> <due at, ms since the epoch> <timeout s> <concurrency> [target url]
//
// N job schedulers (queue.upsertJobScheduler, BullMQ's replacement for repeatable jobs) with
// the daily cron pattern of the instant T (UTC), so each has exactly one occurrence at T: a
// second receipt of one scheduler is a duplicate. One Worker process consumes. Given a target
// URL, its processor does what a cronsvc run does and what a BullMQ user's processor for an
// HTTP job would: sends the request (fetch, Node's undici; job i: GET, or POST one time in four,
// to <target>/<i>, the URLs of bench_scheduler.py's jobs), reads the answer, and returns its
// status as the job's result (BullMQ stores it with the job's completion; removeOnComplete then
// drops it). Without one it only records the receipt. Either way the receipt (scheduler id,
// Date.now()) is taken when the processor starts, as cronsvc's is its worker's claim. BullMQ has no scheduler process: the
// next occurrence of a scheduler is a delayed job, promoted by the workers when due.
// Recommended settings (BullMQ's docs, "Going to production"): maxRetriesPerRequest null on
// the worker's connection, removeOnComplete/removeOnFail so finished jobs do not pile up, and
// a concurrency above 1 for jobs that do not use the CPU.
// Prints one JSON line: upsert time, the receipts' lags (ms after T), duplicates, lost, and
// the moment no occurrence of T was left in the delayed set (the dispatch side).
import { Queue, Worker } from "bullmq";
import IORedis from "ioredis";

const [url, nText, atText, timeoutText, concurrencyText, target] = process.argv.slice(2);
const n = Number(nText);
const at = Number(atText);
const timeoutMs = Number(timeoutText) * 1000;
const concurrency = Number(concurrencyText || 100);
const name = "bench-peer";
const due = new Date(at);
// With seconds (cron-parser's six fields): T is any whole second.
const pattern = `${due.getUTCSeconds()} ${due.getUTCMinutes()} ${due.getUTCHours()} * * *`;

const connection = new IORedis(url, { maxRetriesPerRequest: null });
const queue = new Queue(name, { connection });
await queue.obliterate({ force: true });

const upsertStarted = Date.now();
const CHUNK = 1000;
for (let start = 0; start < n; start += CHUNK) {
  const batch = [];
  for (let i = start; i < Math.min(n, start + CHUNK); i++) {
    batch.push(queue.upsertJobScheduler(`s${i}`, { pattern, tz: "UTC" }, {
      name: "tick", data: { i }, opts: { removeOnComplete: true, removeOnFail: 1000 },
    }));
  }
  await Promise.all(batch);
}
const upsertSeconds = (Date.now() - upsertStarted) / 1000;
if (Date.now() > at - 1000) {
  console.log(JSON.stringify({ error: `upserting took ${upsertSeconds} s: T was too close` }));
  process.exit(2);
}

const seen = new Map();
const lags = [];
let duplicates = 0;
let finished = 0;  // processors done (their request answered, when there is a target)
let failed = 0;    // answers other than 2xx
let lastFinished = 0;
let lastReceipt = 0;
let resolveDone;
const done = new Promise((resolve) => { resolveDone = resolve; });
const worker = new Worker(name, async (job) => {
  const received = Date.now();
  const id = job.repeatJobKey || job.id;
  const count = (seen.get(id) || 0) + 1;
  seen.set(id, count);
  if (count > 1) duplicates += 1;
  else lags.push(received - at);
  lastReceipt = received;
  let status = null;
  try {
    if (target) {
      const i = job.data.i;
      const answer = await fetch(`${target}/${i}`, { method: i % 4 === 0 ? "POST" : "GET" });
      await answer.arrayBuffer();
      status = answer.status;
      if (status >= 300) failed += 1;
    }
  } catch (error) {
    failed += 1;  // kept as the job's failure: the bench counts it, it does not retry it
    throw error;
  } finally {
    finished += 1;
    lastFinished = Date.now();
    if (seen.size >= n && finished >= n) resolveDone();
  }
  return status;
}, { connection: new IORedis(url, { maxRetriesPerRequest: null }), concurrency, autorun: true });

// The dispatch side: no occurrence of T left waiting in the delayed set (BullMQ's score is
// timestamp * 0x1000 + a counter).
const probe = new IORedis(url);
const delayedKey = `bull:${name}:delayed`;
let dispatchEnd = null;
const poll = setInterval(async () => {
  if (dispatchEnd !== null || Date.now() < at) return;
  const left = await probe.zcount(delayedKey, 0, (at + 1) * 0x1000);
  if (left === 0) dispatchEnd = Date.now();
}, 20);

const timer = setTimeout(resolveDone, at - Date.now() + timeoutMs);
await done;
clearTimeout(timer);
// A duplicate would come after the last first receipt: wait a little for one.
await new Promise((resolve) => setTimeout(resolve, 2000));
clearInterval(poll);
await worker.close();
console.log(JSON.stringify({
  peer: "bullmq", n, upsert_seconds: upsertSeconds, concurrency, lags, duplicates, lost: n - seen.size,
  http: Boolean(target), failed, finished_ms: lastFinished ? lastFinished - at : null,
  last_receipt_ms: lastReceipt ? lastReceipt - at : null, dispatch_end_ms: dispatchEnd ? dispatchEnd - at : null,
}));
await queue.obliterate({ force: true });
await queue.close();
await probe.quit();
await connection.quit();
process.exit(0);
