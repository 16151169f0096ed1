"""One outbound policy (docs/security.md, "One outbound policy"): the same hostile URLs, fed to
every surface that reaches out, get the same verdict under the same settings.

The surfaces, each as a customer or a script reaches it: a job saved through the API; a run
delivered by the worker's own code (run_batch, both engines, real PostgreSQL and Redis); a
channel saved through the API and a channel's test message sent; a script's request through
the egress proxy the worker starts (apps.executions.worker.scripts.egress_rules); single sign-on's
discovery fetch (apps.accounts.sso.http, cronsvc.oidc). Each says "refused" (the outbound
guard refused the target: its address or port, or a host spelt in a way parsers disagree
on) or "allowed" (it did not: the request went out, or failed on the way for another
reason); anything else is reported as it is and fails the test.

Before the policy was one, the workers read an empty OUTBOUND_ALLOWED_PORTS as "no port"
(the rest as the default list) and SSO ignored OUTBOUND_ALLOWED_NETWORKS. The last setting
below replaces the one factory's answer (guard._outbound_policy) behind the settings' back:
a surface that built its own policy from the settings would still refuse loopback there.
tests/foundation/test_one_outbound_policy.py refuses a second copy in the source.
"""

import itertools
import socket
from dataclasses import dataclass

import pytest
from django.utils import timezone

from apps.accounts import sso
from apps.executions.worker.batch import run_batch
from apps.executions.models import Execution
from apps.executions.shared_redis import redis_client
from apps.executions.worker.scripts import egress_rules
from apps.notifications.models import Channel
from cronsvc import oidc
from cronsvc.delivery import guard
from cronsvc.delivery.breaker import host_key
from cronsvc.sandbox.egress import EgressProxy
from tests.api.conftest import job_body

# {port} is the local endpoint's: loopback the allow-list may open.
LOOPBACK = [
    "http://127.0.0.1:{port}/",
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://localhost:{port}/",
]
# Never reachable under any setting below (none is ever contacted).
NEVER = [
    # Spellings of 127.0.0.1 that getaddrinfo reads as the address, and the asyncio engine's
    # URL parser refuses (127.1, 2130706433) or takes for a name (0x7f000001): refused as
    # loopback, and where loopback is allowed as an invalid host (write 127.0.0.1).
    "http://127.1:{port}/",
    "http://2130706433:{port}/",
    "http://0x7f000001:{port}/",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://10.0.0.1/",
    "http://[fe80::1]/",  # IPv6 link-local
    "http://[fe80::1%25eth0]:{port}/",
    "http://127.0.0.1:25/",  # loopback, on a port outside the list
    "http://93.184.215.14:25/",  # a public address on a port outside the list
]
LOOPBACK_NETWORKS = ["127.0.0.0/8", "::1/128"]
DEFAULT_PORTS = "80,443,1024-65535"


@dataclass(frozen=True)
class Setting:
    name: str
    networks: tuple = ()
    ports: str = DEFAULT_PORTS
    factory_allows_loopback: bool = False  # the factory is replaced; the settings stay the default

    @property
    def loopback_allowed(self):
        return self.factory_allows_loopback or (bool(self.networks) and self.ports != "443")

    def __str__(self):
        return self.name


SETTINGS = [
    Setting("default"),
    Setting("loopback allowed", networks=tuple(LOOPBACK_NETWORKS)),
    Setting("loopback allowed, OUTBOUND_ALLOWED_PORTS empty", networks=tuple(LOOPBACK_NETWORKS), ports=""),
    Setting("loopback allowed, port 443 only", networks=tuple(LOOPBACK_NETWORKS), ports="443"),
    Setting("the factory allows loopback", factory_allows_loopback=True),
]
_names = itertools.count(1)


# --- the surfaces: each answers "refused", "allowed" or what else happened

def job_save(world, url):
    response = world.api.post("/api/v1/jobs/", job_body(world.tenant, name=f"job {next(_names)}",
                                                        request={"url": url}), format="json")
    return _api_verdict(response)


def channel_save(world, url):
    response = world.api.post("/api/v1/channels/", {"project": str(world.tenant.project.pk), "kind": "slack",
                                                    "name": f"channel {next(_names)}", "config": {"url": url}},
                              format="json")
    return _api_verdict(response)


def _api_verdict(response):
    if response.status_code == 201:
        return "allowed"
    code = response.json().get("error", {}).get("code")
    refused = response.status_code == 400 and code in ("forbidden_target", "invalid_host")
    return "refused" if refused else f"{response.status_code} {code}"


def channel_test(world, url):
    channel = Channel.objects.create(organization=world.tenant.organization, project=world.tenant.project,
                                     kind="slack", name=f"channel {next(_names)}", config={"url": url})
    detail = world.api.post(f"/api/v1/channels/{channel.id}/test/").json()["detail"]
    return _delivery_verdict(detail.partition(":")[0] if not detail.startswith("HTTP ") else None)


def worker(world, url):
    redis_client().delete("cronsvc:cb:" + host_key(url))  # a closed circuit, whatever came before
    job = world.make_job(world.tenant, url=url)
    execution = Execution.objects.create(job=job, organization=world.tenant.organization,
                                         scheduled_for=timezone.now(), queue="q")
    run_batch([execution.id])
    execution.refresh_from_db()
    return _delivery_verdict(execution.error_kind)


def _delivery_verdict(error_kind):
    if error_kind == "forbidden_target":
        return "refused"
    return "allowed" if error_kind in (None, "", "connect_error") else error_kind


def egress_proxy(world, url):
    with EgressProxy(egress_rules()) as proxy, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(20)
        client.connect(proxy.socket_path)
        client.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = client.recv(65536).split(b"\r\n\r\n")[0]
    if b"X-Egress-Error: egress_forbidden" in head or b"X-Egress-Error: egress_bad_request" in head:
        return "refused"  # the guard refused the address (403) or the host's spelling (400)
    status = head.split(b" ")[1].decode()
    return "allowed" if status in ("200", "502") else head.decode()


def sso_discovery(world, url):
    try:
        oidc.discover(sso.http(), url)
    except oidc.OIDCError as exc:
        return "refused" if isinstance(exc.__cause__, guard.ForbiddenTarget) else "allowed"
    return "allowed"


SURFACES = [job_save, worker, channel_save, channel_test, egress_proxy, sso_discovery]


@dataclass
class World:
    api: object
    tenant: object
    make_job: object


@pytest.fixture
def world(api, tenant, make_job):
    return World(api, tenant, make_job)


def apply(setting, settings, monkeypatch):
    settings.OUTBOUND_ALLOW_PRIVATE = False
    settings.OUTBOUND_ALLOWED_NETWORKS = list(setting.networks)
    settings.OUTBOUND_ALLOWED_PORTS = setting.ports
    settings.SSO_ALLOWED_NETWORKS = []
    if setting.factory_allows_loopback:
        policy = guard.AddressPolicy(allowed_networks=tuple(LOOPBACK_NETWORKS))
        monkeypatch.setattr(guard, "_outbound_policy", lambda *args: policy)


@pytest.mark.parametrize("url", LOOPBACK + NEVER)
@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_every_surface_gives_the_same_verdict(world, target, settings, monkeypatch, setting, url):
    apply(setting, settings, monkeypatch)
    url = url.format(port=target.server.server_address[1])
    expected = "allowed" if setting.loopback_allowed and url.replace(
        str(target.server.server_address[1]), "{port}") in LOOPBACK else "refused"
    verdicts = {surface.__name__: surface(world, url) for surface in SURFACES}
    assert verdicts == {surface.__name__: expected for surface in SURFACES}, url
    if expected == "refused":
        assert target.received == []  # no surface reached the endpoint
