"""Single sign-on for the web UI: ``helmop ui --auth oidc`` as the chart runs it (its ServiceAccount and ClusterRole),
a loopback OIDC issuer (tests/oidc.py) that signs its user in at once, Debian's chromium driven by Playwright, and
the sign-in's steps over plain HTTP for each answer that must be refused."""

from __future__ import annotations

import base64
import html
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import Cookie, CookieJar

import pytest
from playwright.sync_api import Browser

from tests.browser import CHROMIUM, NO_CHROMIUM, Ui
from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, get, watched
from tests.controllers.test_ui import browser, closed_port, mine_and_theirs, ui_account
from tests.oidc import Issuer, rsa_key
from tests.tools import Run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
CLIENT, SECRET = "helmop-ui", "client-secret-5d1c"
ALICE = {"email": "alice@example.com", "email_verified": True, "groups": ["shop-editors", "system:masters"]}


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    running = Issuer()
    running.clients[CLIENT] = SECRET
    yield running
    running.close()


__all__ = ["browser"]  # the fixture, as test_ui has it


@pytest.fixture(scope="module")
def sso_ui(operator: Operator, kube: Run, issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """The UI with the chart's own account (it may impersonate, nothing more), signing viewers in with ``issuer``:
    users by email, groups prefixed ``oidc:``."""
    folder = tmp_path_factory.mktemp("sso")
    ui_account(operator, kube, folder)
    (folder / "client-secret").write_text(SECRET + "\n")
    (folder / "session-key").write_text("k" * 40)
    port = closed_port()
    ui = Ui(folder / "kubeconfig", "--port", str(port), "--auth", "oidc", "--actions", "--oidc-issuer", issuer.url,
            "--oidc-client-id", CLIENT, "--oidc-client-secret-file", str(folder / "client-secret"),
            "--oidc-redirect-url", f"http://127.0.0.1:{port}/oauth2/callback", "--oidc-groups-prefix", "oidc:",
            "--session-key-file", str(folder / "session-key"))
    yield ui
    ui.close()


def names(page: object) -> list[str]:
    return page.eval_on_selector_all("tr[data-name]", "rows => rows.map(r => r.dataset.name)")  # type: ignore


def test_a_viewer_signs_in_sees_what_their_groups_may_and_acts_in_their_name(
        kube: Run, ns: str, chart_repo: ChartRepo, issuer: Issuer, sso_ui: Ui, browser: Browser) -> None:
    other = mine_and_theirs(kube, ns, chart_repo)
    kube("kubectl", "-n", ns, "create", "rolebinding", "editors", "--clusterrole=edit", "--group=oidc:shop-editors")
    issuer.user = ALICE

    # off to the issuer and back, to the page first asked for
    context = browser.new_context()
    page = context.new_page()
    wanted = f"{sso_ui.url}helmreleases?namespace={ns}"
    page.goto(wanted)
    assert "/login" in page.url
    page.click("#sign-in")
    page.wait_for_url(wanted)
    assert "alice@example.com" in page.inner_text("header")
    assert names(page) == ["mine"]
    asked = urllib.parse.parse_qs(urllib.parse.urlsplit(next(p for p in issuer.paths if p.startswith("/auth"))).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["nonce"][0] and asked["scope"] == [
        "openid email profile"]
    assert issuer.redeemed[-1]["code_verifier"]  # (the issuer checked it against the challenge)

    # the session: the mapped identity, sealed; the issuer's "system:masters" is prefixed as every group is
    session = next(c for c in context.cookies() if c["name"] == "helmop-token")
    assert session["httpOnly"] and session["sameSite"] == "Lax"
    body, mac = session["value"].split(".")
    sealed = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert sealed["v"]["u"] == "alice@example.com" and mac
    assert sealed["v"]["g"] == ["oidc:shop-editors", "oidc:system:masters"]
    assert not any(c["name"] == "helmop-sign-in" for c in context.cookies())  # the sign-in's own: spent

    # what RBAC gives her group: the other namespace's release is neither listed nor readable
    page.goto(f"{sso_ui.url}helmreleases?namespace={other}")
    assert names(page) == [] and "the API server refused you" in page.inner_text("main")
    answer = page.goto(f"{sso_ui.url}helmreleases/{other}/theirs")
    assert answer is not None and answer.status == 403

    # an action, recorded with her name
    page.goto(f"{sso_ui.url}helmreleases/{ns}/mine")
    page.click("button:has-text('Reconcile')")
    assert "Asked: reconcile" in page.inner_text("p.done")
    by = watched(kube, ns, "hr", "mine", lambda o: o["metadata"]["annotations"].get("helmop.dev/requestedBy"))
    assert json.loads(by)["by"] == "alice@example.com"
    assert get(kube, other, "hr", "theirs")["metadata"].get("annotations", {}).get("helmop.dev/requestedBy") is None

    # logging out ends the session: the next page asks to sign in again
    page.click("button:has-text('Log out')")
    page.wait_for_url("**/login")
    assert not any(c["name"] == "helmop-token" for c in context.cookies())
    page.goto(wanted)
    assert "/login" in page.url and page.locator("#sign-in").count() == 1
    context.close()


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: object) -> None:
        return None


class Client:
    """A browser without a browser: cookies kept, each redirect followed by the test."""

    def __init__(self) -> None:
        self.jar = CookieJar()
        self._open = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirects).open

    def get(self, url: str) -> tuple[int, str, str]:
        """The status, the Location and the body of ``url``'s answer."""
        try:
            with self._open(url, timeout=30) as answer:
                return answer.status, answer.headers.get("Location", ""), answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Location", ""), exc.read().decode()

    def cookie(self, name: str) -> str:
        return next((c.value or "" for c in self.jar if c.name == name), "")

    def set_cookie(self, name: str, value: str) -> None:
        self.jar.set_cookie(Cookie(0, name, value, None, False, "127.0.0.1", False, False, "/", True, False, None,
                                   False, None, None, {}))

    def to_issuer(self, ui: Ui) -> str:
        """Off to the issuer: the URL it sends the browser back to."""
        status, issuer_url, _ = self.get(f"{ui.url}login/sso")
        assert status == 302 and self.cookie("helmop-sign-in"), status
        status, back, _ = self.get(issuer_url)
        assert status == 302 and "/oauth2/callback?" in back, back
        return back


def signed_in(client: Client, ui: Ui) -> bool:
    status, where, _ = client.get(ui.url)
    assert status in (200, 303), status
    return status == 200


@pytest.mark.parametrize(("minting", "said"), [
    ({"audience": "another-client"}, "audience doesn't match"),
    ({"claims": {"nonce": "from-another-sign-in"}}, "nonce is not this sign-in's"),
    ({"key": rsa_key()}, "signature does not verify"),
    ({"issuer": "https://issuer.example"}, "issuer is not"),
    ({"lifetime": -120}, "has expired"),
])
def test_an_id_token_that_is_not_this_sign_ins_is_refused(minting: dict[str, object], said: str, issuer: Issuer,
                                                          sso_ui: Ui) -> None:
    issuer.user, issuer.minting = ALICE, minting
    client = Client()
    try:
        status, _, answer = client.get(client.to_issuer(sso_ui))
    finally:
        issuer.minting = {}
    page = html.unescape(answer)
    assert status == 401 and said in page.lower(), page
    assert "Not signed in" in page and not client.cookie("helmop-token") and not signed_in(client, sso_ui)
    for token in issuer.minted:
        assert token not in page and token.split(".")[1] not in page  # nor any part of it


def test_a_forged_answer_or_session_is_refused(issuer: Issuer, sso_ui: Ui) -> None:
    issuer.user = ALICE
    # the issuer's answer to another browser's sign-in (its state differs), and one without a sign-in here
    client = Client()
    back = client.to_issuer(sso_ui)
    status, _, page = client.get(back.replace("state=", "state=x"))
    assert status == 401 and "its state differs" in page and not signed_in(client, sso_ui)
    status, _, page = Client().get(back)
    assert status == 401 and "no sign-in of this browser is under way" in page
    # the issuer said no
    status, _, page = Client().get(f"{sso_ui.url}oauth2/callback?error=access_denied&error_description=not+you")
    assert status == 401 and "access_denied not you" in page

    # a session signed right, then changed; or sealed with another key
    good = Client()
    assert good.get(good.to_issuer(sso_ui))[0] == 303 and signed_in(good, sso_ui)
    body, mac = good.cookie("helmop-token").split(".")
    sealed = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    sealed["v"]["g"] = ["system:masters"]
    forged = base64.urlsafe_b64encode(json.dumps(sealed).encode()).rstrip(b"=").decode()
    for value in (f"{forged}.{mac}", f"{body}.{mac[:-2]}AA", f"{body}."):
        client = Client()
        client.set_cookie("helmop-token", value)
        assert not signed_in(client, sso_ui), value
