"""The soak's clock faults run a process under libfaketime: its wall clock must jump while
its sleeps and timed waits keep working (they hung for decades when libfaketime faked the
monotonic clock too, so the "skewed" scheduler proved nothing)."""

import os
import subprocess
import sys


from soak import chaos

PROBE = """
import threading, time
start = time.time()
time.sleep(0.2)
threading.Event().wait(0.2)
print("waited", flush=True)
deadline = time.monotonic() + 20
while time.time() - start < 1800 and time.monotonic() < deadline:
    threading.Event().wait(0.1)
    time.sleep(0.05)
print("jumped" if time.time() - start >= 1800 else "no jump", flush=True)
"""


def test_a_faked_process_sleeps_waits_and_sees_its_clock_jump(tmp_path):
    # make test installs libfaketime (make faketime): its absence is a failure, not a skip
    assert chaos.faketime_library() is not None, "libfaketime is missing: run make faketime"
    stamp = tmp_path / "stamp"
    stamp.write_text("+0\n")
    env = {**os.environ, **chaos.faketime_env(os.environ, FAKETIME_TIMESTAMP_FILE=str(stamp),
                                              FAKETIME_CACHE_DURATION="1")}
    probe = subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert probe.stdout.readline().strip() == "waited"
        stamp.write_text("+3600\n")
        assert probe.stdout.readline().strip() == "jumped"
        assert probe.wait(10) == 0
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
