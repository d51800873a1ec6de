"""shoal-restd's web view in a real headless browser (Debian's chromium over the DevTools protocol):
the URL `shoal up` prints logs in, a job shows on the GPUs ctld gave it and leaves them when it ends
(no reload), the queue, fair-share and what-if pages load, and a bad token lands on the login page.
One cluster (2 nodes x 8 GPUs, accounting) and one browser serve the whole module."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from shoal.auth.token import mint_token
from tests.e2e.browser import Browser, find_chromium
from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium (apt-get install chromium) for the browser tests"
    ),
]
GPUS = 8  # a DGX H100 per node: `shoal up` gives 8 h100 the fake NVML (utilization, memory)
CELLS = "[...document.querySelectorAll('.gpu')].map(c => [c.dataset.node, +c.dataset.index, c.dataset.job, c.dataset.user])"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("webview")
    usage = base / "usage.json"  # the fake NVML's readings: every GPU at 3 %, 512 MiB used
    usage.write_text(json.dumps({str(m): {"utilization": 3, "memory_used_mb": 512} for m in range(GPUS)}))
    usage.chmod(0o644)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SHOAL_FAKE_NVML_USAGE", str(usage))
        c = start_cluster(
            base / "c",
            accounting=True,
            up_args=("--gpus-per-node", str(GPUS), "--gpu-type", "h100", "--no-cgroups"),
            extra=(
                "SchedulerParameters=shoal_gpu_idle_threshold=10,shoal_gpu_idle_time=1",
                "SlurmdTimeout=12",  # pings (which carry the readings) every 4 s
            ),
            restd=True,
        )
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    assert CHROMIUM is not None
    b = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(autouse=True)
def fresh_errors(browser: Browser) -> None:
    browser.errors.clear()  # each test answers for the console errors of its own pages


def _base(c: Cluster) -> str:
    return (c.dir / "run" / "restd.url").read_text().strip()


def _gpus_of(c: Cluster, job_id: int) -> set[tuple[str, int]]:
    """(node, GPU index) the job holds, as `scontrol -d show job` prints them (GRES=...(IDX:1-2))."""
    held = set()
    for node, idx in re.findall(
        r"Nodes=(\S+) .*GRES=gpu:\S*\(IDX:([\d,-]+)\)", c.ok("scontrol", "-d", "show", "job", str(job_id))
    ):
        for part in idx.split(","):
            first, _, last = part.partition("-")
            held |= {(node, i) for i in range(int(first), int(last or first) + 1)}
    return held


def _screenshot(browser: Browser, tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    path = browser.screenshot(tmp_path_factory.getbasetemp() / f"webview-{name}.png")
    print(f"web view screenshot: {path}")


def test_the_printed_url_logs_in_and_the_grid_follows_a_job_on_its_gpus(
    cluster: Cluster, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    printed = re.search(r"^shoal: web view at (\S+)$", cluster.up_output, re.M)
    assert printed and "?token=eyJ" in printed.group(1), cluster.up_output
    browser.open(printed.group(1))
    assert browser.url() == f"{_base(cluster)}/web/nodes"  # the token left the address bar ...
    assert [(k["name"], k["httpOnly"]) for k in browser.cookies()] == [
        ("shoal_token", True)
    ]  # ... for a cookie
    assert browser.evaluate("document.getElementById('user').textContent") == "root"
    browser.wait("the grid", f"document.querySelectorAll('.gpu').length === {2 * GPUS}")

    first = cluster.submit("--gres=gpu:1", "-w", "node1", "-t", "5", "--wrap", "sleep 300")
    cluster.wait_state(first, {"RUNNING"})
    second = cluster.submit(
        "--gres=gpu:2",
        "-w",
        "node1",
        "-t",
        "5",
        "-J",
        "train",
        "-D",
        "/tmp",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 300",
        user=NOBODY,
    )
    cluster.wait_state(second, {"RUNNING"})
    browser.evaluate("window.stayed = true")  # gone if the page reloads
    holders = {**{g: (str(first), "root") for g in _gpus_of(cluster, first)},
               **{g: (str(second), "nobody") for g in _gpus_of(cluster, second)}}  # fmt: skip
    assert len(holders) == 3

    def grid() -> dict[tuple[str, int], tuple[str, str]]:
        return {(n, i): (j, u) for n, i, j, u in browser.evaluate(CELLS) if j}

    wait_until("the jobs on their GPUs", lambda: grid() == holders, timeout=30)
    cell = browser.evaluate(f"document.querySelector('.gpu[data-job=\"{second}\"]').innerText")
    assert f"job {second}" in cell and "nobody · train" in cell
    _screenshot(browser, tmp_path_factory, "nodes")

    cluster.ok("scancel", str(second))
    wait_until(
        "the GPUs freed on the page",
        lambda: grid() == {g: h for g, h in holders.items() if h[1] == "root"},
        timeout=30,
    )
    assert browser.evaluate("window.stayed === true")  # updated in place, not reloaded
    cluster.ok("scancel", str(first))
    assert browser.errors == []


def test_queue_fair_share_and_what_if_pages(
    cluster: Cluster, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    browser.open(f"{_base(cluster)}/web/?token={_token(cluster)}")
    done = cluster.submit("-n", "2", "-t", "1", "--wrap", "true")
    later = cluster.submit("--begin=now+1hour", "-t", "5", "--wrap", "true")
    browser.open(f"{_base(cluster)}/web/queue")
    row = f"document.querySelector('#queue tr[data-job=\"{later}\"]')"
    browser.wait("the pending job", f"{row} && {row}.dataset.state === 'PENDING'")
    cells = browser.evaluate(f"[...{row}.cells].map(c => c.textContent)")
    assert cells[6] == "BeginTime"
    assert (
        cells[8] == cluster.ok("squeue", "--start", "-h", "-j", str(later), "-o", "%S").strip()
    )  # its planned start

    cluster.wait_state(done, {"COMPLETED"})
    # with no job running the usage holds still; the page polls, so it shows sshare -a's rows, cell
    # for cell, by its next refresh
    browser.open(f"{_base(cluster)}/web/shares")
    browser.wait("the shares", "!!document.querySelector('#shares tr[data-user=\"root\"]')")
    rows = "[...document.querySelectorAll('#shares tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()).join('|'))"
    sshare: list[str] = []

    def same_rows() -> bool:
        sshare[:] = [line.strip() for line in cluster.ok("sshare", "-a", "-P", "-n").splitlines()]
        return bool(browser.evaluate(rows) == sshare)

    wait_until(f"the shares page to show sshare -a's rows {sshare}", same_rows, 30)
    wait_until(
        "the finished job in accounting",
        lambda: "COMPLETED" in cluster.ok("sacct", "-X", "-n", "-j", str(done), "-o", "State"),
    )
    browser.open(f"{_base(cluster)}/web/whatif")
    browser.wait("the replay", "document.querySelectorAll('#plots svg').length === 2", timeout=120)
    policies = browser.evaluate(
        "[...document.querySelectorAll('#whatif tbody tr')].map(r => r.dataset.policy)"
    )
    assert policies == ["conf", "fcfs", "easy", "shoal"]
    _screenshot(browser, tmp_path_factory, "whatif")
    cluster.ok("scancel", str(later))
    assert browser.errors == []


def _token(c: Cluster, user: int | None = None) -> str:
    return c.ok("scontrol", "token", user=user).strip().split("=", 1)[1]


def test_a_bad_or_expired_token_lands_on_the_login_page_and_the_form_logs_in(
    cluster: Cluster, browser: Browser
) -> None:
    base = _base(cluster)
    key = (cluster.dir / "jwt_hs256.key").read_bytes()
    for token, words in (
        ("garbage", "not valid"),
        (mint_token(key, "root", 60, time.time() - 3600), "expired"),
    ):
        browser.open(f"{base}/web/?token={token}")
        assert browser.url() == f"{base}/web/login?error={'invalid' if words == 'not valid' else 'expired'}"
        assert words in browser.evaluate("document.getElementById('message').textContent")
        assert browser.cookies() == [] and browser.evaluate("document.getElementById('grid')") is None
    try:
        urllib.request.urlopen(f"{base}/web/api/queue", timeout=10)
        raise AssertionError("the data answered without a token")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401 and set(json.loads(exc.read())) == {"error", "login"}  # nothing else

    browser.evaluate(f"document.getElementById('token').value = 'SLURM_JWT={_token(cluster, NOBODY)}'")
    browser.evaluate("document.querySelector('form').submit()")
    browser.wait("the nodes page", "location.pathname === '/web/nodes' && !!document.getElementById('user')")
    assert browser.evaluate("document.getElementById('user').textContent") == "nobody"

    # the token expires while the page is open: the next poll goes to the login page, which says so
    expired = mint_token(key, "nobody", 60, time.time() - 3600)
    browser.send("Network.setCookie", name="shoal_token", value=expired, url=base, httpOnly=True)
    browser.wait("the login page", "location.search === '?error=expired'", timeout=30)
    assert "expired" in browser.evaluate("document.getElementById('message').textContent")
    # that poll: the nodes page's data, or the GPU readings it polls beside them
    polls = ("/web/api/nodes", "/shoal/v1/gpus")
    assert browser.errors and all("401" in e and any(p in e for p in polls) for e in browser.errors)

    browser.open(f"{base}/web/?token={_token(cluster)}")
    browser.evaluate("document.querySelector('form.who').submit()")  # Log out
    browser.wait("the logged-out page", "location.search === '?error=logout'")
    browser.open(f"{base}/web/queue")
    assert browser.url() == f"{base}/web/login" and browser.cookies() == []


def test_utilization_idle_and_why_from_restd(
    cluster: Cluster, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The cells' NVML figures and idle flag come from restd's /shoal/v1/gpus (the fake NVML's usage
    file: 3 % on every GPU, under the cluster's 10 % idle threshold), the why? panel from ctld's explainer."""
    running = cluster.submit("--gres=gpu:1", "-w", "node2", "-t", "5", "--wrap", "sleep 300")
    cluster.wait_state(running, {"RUNNING"})
    ((node, index),) = _gpus_of(cluster, running)
    waiting = cluster.submit("--begin=now+1hour", "-t", "5", "--wrap", "true")
    base = _base(cluster)
    try:
        browser.open(f"{base}/web/?token={_token(cluster)}")
        cell = f'document.querySelector(\'.gpu[data-node="{node}"][data-index="{index}"]\')'
        browser.wait("the idle flag", f"!!{cell} && {cell}.classList.contains('idle')", timeout=60)
        text = browser.evaluate(f"{cell}.innerText")
        assert "3% util" in text and "512 / 81559 MiB" in text and "idle since" in text
        # every GPU is sampled; only the one a job holds can be idle
        assert browser.evaluate("document.querySelectorAll('.gpu-util').length") == 2 * GPUS
        assert browser.evaluate("document.querySelectorAll('.gpu.idle').length") == 1
        _screenshot(browser, tmp_path_factory, "gpus")

        browser.open(f"{base}/web/queue")
        button = f"document.querySelector('#queue tr[data-job=\"{waiting}\"] button.why')"
        browser.wait("the why? button", f"!!{button}")
        browser.evaluate(f"{button}.click()")
        browser.wait("the why panel", "!document.getElementById('why').hidden")
        panel = browser.evaluate("document.getElementById('why').innerText")
        # ctld's own explainer (shoal why), as the command prints it
        said = json.loads(cluster.ok("shoal_admin", "why", "--json", str(waiting)))
        assert f"Why is job {waiting} pending?" in panel and "Reason: BeginTime" in panel
        assert said["waits_for"] and all(w["text"] in panel for w in said["waits_for"])
        assert "{" not in panel  # every part in words, none as raw JSON
        _screenshot(browser, tmp_path_factory, "why")
        assert browser.errors == []
    finally:
        cluster.ok("scancel", str(running), str(waiting))
