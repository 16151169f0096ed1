"""Turn the command part of a crontab line (curl or wget) into an HTTP request.

We read the command the way /bin/sh would split it (shlex, with shell operators as
separate tokens), keep the first simple command, drop output redirections, and
interpret the options of curl or wget that shape the request. Options that only
affect the local process (silence, output files, timeouts, retries) are tolerated
and ignored; anything we cannot reproduce faithfully is refused with a reason.

The request is a dict: {"url", "method", "headers": {}, "body": str,
"body_format": "raw" | "json" | "form"}. The Content-Type curl or wget would imply
for -d/--post-data is conveyed by body_format rather than added to headers.
"""

from __future__ import annotations

import base64
import re
import shlex
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

_SEPARATORS = {";", ";;", "&", "&&", "|", "||", "|&"}
_REDIRECTS = {">", ">>", "<", ">&", "&>", ">|", "&>>", "<<", "<<<", "<&", "<>"}
_FD_BEFORE_REDIRECT = re.compile(r"(?:(?<=\s)|^)\d+(?=[<>])")
_QUOTED = re.compile(r"""('[^']*'|"(?:\\.|[^"\\])*")""")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_USER_FIELD = re.compile(r"^[a-z_][a-z0-9_-]*$")


class CommandError(Exception):
    """The command cannot be imported; ``code`` is a CrontabLineError code."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass
class _Request:
    url: str | None = None
    method: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    data: list[str] = field(default_factory=list)
    body_format: str | None = None
    query_from_data: bool = False  # curl -G

    def as_dict(self) -> dict:
        if self.url is None:
            raise CommandError("unparseable_command", "no URL found in the command.")
        url, body = self.url, "&".join(self.data)
        if self.query_from_data and body:
            url, body = _with_query(url, body, json=self.body_format == "json"), ""
        method = self.method or ("POST" if body else "GET")
        body_format = self.body_format or (_format_from_headers(self.headers) if body else "raw")
        return {
            "url": url,
            "method": method.upper(),
            "headers": self.headers,
            "body": body,
            "body_format": body_format,
        }


def _with_query(url: str, data: str, *, json: bool) -> str:
    """curl -G: the data appended to the URL's query as it is (curl encodes nothing but
    --data-urlencode's values). Refused when that makes no URL curl would send."""
    if json:
        raise CommandError(
            "conflicting_options",
            "-G puts --json's JSON into the URL's query string instead of the body; drop -G to send it as the body.",
        )
    if any(char.isspace() or ord(char) < 32 for char in data):
        raise CommandError(
            "invalid_url",
            f"with -G the data '{data}' becomes the URL's query, and a space there makes no valid URL; "
            "use --data-urlencode for that value (or write it encoded, e.g. %20 for a space).",
        )
    separator = "" if url.endswith(("?", "&")) else "&" if "?" in url else "?"
    return f"{url}{separator}{data}"


def parse_http_command(command: str, variables: dict[str, str], *, user_field: bool = False) -> dict:
    """The request a crontab command would send; raises CommandError. ``user_field``: the
    command starts with the user to run it as (a system crontab: /etc/crontab, /etc/cron.d)."""
    words, tokens = _first_simple_command(_substitute(command, variables))
    program, args = _program(words, tokens, user_field=user_field)
    request = _Request()
    (_parse_curl if program == "curl" else _parse_wget)(args, request)
    return request.as_dict()


# ---------------------------------------------------------------- shell level


def _substitute(command: str, variables: dict[str, str]) -> str:
    """Expand $NAME / ${NAME} from the crontab's own VAR=value lines (quotes are not considered)."""
    if "`" in command or "$(" in command:
        raise CommandError(
            "unparseable_command", "the command uses command substitution, which cannot be imported."
        )

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise CommandError(
                "unparseable_command", f"the command uses ${name}, which this crontab does not set."
            )
        return variables[name]

    return _VARIABLE.sub(value, command)


def _first_simple_command(command: str) -> tuple[list[str], list[str]]:
    """The words of the first command of a pipeline/list (without redirections), and all tokens."""
    parts = _QUOTED.split(command)  # odd indexes are quoted strings: leave them alone
    command = "".join(p if i % 2 else _FD_BEFORE_REDIRECT.sub("", p) for i, p in enumerate(parts))
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise CommandError(
            "unparseable_command", f"the command cannot be split into words ({exc})."
        ) from None
    words, pending_redirect = [], False
    for token in tokens:
        if token in _SEPARATORS:
            break
        if pending_redirect:
            pending_redirect = False
        elif token in _REDIRECTS:
            pending_redirect = True
        else:
            words.append(token)
    if not words:
        raise CommandError("unparseable_command", "the command is empty.")
    return words, tokens


def _is_http_program(word: str) -> bool:
    return word.rsplit("/", 1)[-1] in ("curl", "wget")


def starts_with_user_field(command: str) -> bool:
    """Whether ``command`` reads as a system crontab's "user command": a user name, then curl
    or wget, or a system account (root, www-data, ...) then anything."""
    words = command.split(None, 2)
    if len(words) < 2 or not _USER_FIELD.match(words[0]):
        return False
    return words[0] in SYSTEM_ACCOUNTS or _is_http_program(words[1])


# Accounts system crontabs run commands as; a command of this name is very unlikely.
SYSTEM_ACCOUNTS = frozenset("root daemon nobody www-data www apache nginx http postgres mysql redis backup "
                            "deploy ubuntu debian admin app".split())


def _program(words: list[str], tokens: list[str], *, user_field: bool = False) -> tuple[str, list[str]]:
    """("curl" | "wget", its arguments); tolerates the user field of a system crontab."""
    user = None
    if len(words) > 1 and _USER_FIELD.match(words[0]) and (user_field or _is_http_program(words[1])):
        user, words = words[0], words[1:]
    if _is_http_program(words[0]):
        return words[0].rsplit("/", 1)[-1], words[1:]
    if any(_is_http_program(token) for token in tokens):
        raise CommandError(
            "unparseable_command",
            "curl/wget is not the first command on the line (e.g. after 'sleep ...;' or 'cd ... &&'); "
            "import it by hand, and use the job's jitter setting instead of a sleep.",
        )
    as_user = f" as {user}" if user else ""
    raise CommandError(
        "not_http", f"the command runs '{words[0]}'{as_user}, not curl or wget; only HTTP calls can be imported."
    )


def _format_from_headers(headers: dict[str, str]) -> str:
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    if content_type is None or "x-www-form-urlencoded" in content_type:
        return "form"
    if "json" in content_type:
        return "json"
    return "raw"


def _set_url(request: _Request, url: str) -> None:
    if request.url is not None:
        raise CommandError(
            "unparseable_command", "the command requests more than one URL; import one job per URL."
        )
    if "://" not in url:
        url = "http://" + url  # what curl and wget assume
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise CommandError("not_http", f"'{url}' is not an http(s) URL.")
    request.url = url


def _header(request: _Request, text: str) -> None:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise CommandError("unparseable_command", f"header '{text}' is not of the form 'Name: value'.")
    request.headers[name.strip()] = value.strip()


def _basic_auth(request: _Request, credentials: str) -> None:
    if ":" not in credentials:
        raise CommandError(
            "unparseable_command", "-u without a password would prompt for one; give 'user:password'."
        )
    token = base64.b64encode(credentials.encode("utf-8")).decode("ascii")
    request.headers["Authorization"] = f"Basic {token}"


def _data(request: _Request, value: str, *, literal: bool = False, urlencode: bool = False) -> None:
    if value.startswith("@") and not literal:
        raise CommandError(
            "unparseable_command", f"the data is read from a file ('{value}'), which the service cannot see."
        )
    if urlencode:
        name, eq, content = value.rpartition("=")
        value = f"{name}={quote(content, safe='')}" if eq and name else quote(content, safe="")
    request.data.append(value)


# ---------------------------------------------------------------- curl

_CURL_FLAGS = frozenset(
    (
        "-s --silent -S --show-error -f --fail --fail-with-body -L --location -k --insecure -v "
        "--verbose -i --include --compressed -# --progress-bar --no-progress-meter -4 -6 --http1.1 "
        "--http2 -N --no-buffer -q --globoff -g --location-trusted --no-keepalive --ipv4 --ipv6 "
        "--tcp-nodelay"
    ).split()
)
_CURL_IGNORED_VALUES = frozenset(
    (
        "-o --output -m --max-time --connect-timeout --retry --retry-delay --retry-max-time -w "
        "--write-out --stderr -D --dump-header --max-redirs -c --cookie-jar --trace --trace-ascii -y "
        "--speed-time -Y --speed-limit"
    ).split()
)


def _header_option(header_name: str):
    return lambda request, value: _header(request, f"{header_name}: {value}")


def _method(request: _Request, value: str) -> None:
    request.method = value


def _curl_json(request: _Request, value: str) -> None:
    _data(request, value)
    request.body_format = "json"
    request.headers.setdefault("Accept", "application/json")


_CURL_VALUES = {
    "-X": _method,
    "--request": _method,
    "-H": _header,
    "--header": _header,
    "-d": _data,
    "--data": _data,
    "--data-ascii": _data,
    "--data-binary": _data,
    "--data-raw": lambda request, value: _data(request, value, literal=True),
    "--data-urlencode": lambda request, value: _data(request, value, urlencode=True),
    "--json": _curl_json,
    "-u": _basic_auth,
    "--user": _basic_auth,
    "-A": _header_option("User-Agent"),
    "--user-agent": _header_option("User-Agent"),
    "-e": _header_option("Referer"),
    "--referer": _header_option("Referer"),
    "--url": _set_url,
}
_CURL_SPECIAL_FLAGS = {
    "-G": lambda request: setattr(request, "query_from_data", True),
    "--get": lambda request: setattr(request, "query_from_data", True),
    "-I": lambda request: setattr(request, "method", "HEAD"),
    "--head": lambda request: setattr(request, "method", "HEAD"),
}


def _parse_curl(args: list[str], request: _Request) -> None:
    queue = list(args)
    while queue:
        arg = queue.pop(0)
        if arg.startswith("--"):
            _curl_long(arg, queue, request)
        elif arg.startswith("-") and len(arg) > 1:
            _curl_short_cluster(arg, queue, request)
        else:
            _set_url(request, arg)


def _curl_long(arg: str, queue: list[str], request: _Request) -> None:
    if arg in _CURL_FLAGS:
        return
    if arg in _CURL_SPECIAL_FLAGS:
        _CURL_SPECIAL_FLAGS[arg](request)
        return
    if arg in _CURL_VALUES or arg in _CURL_IGNORED_VALUES:
        value = _take_value(arg, queue)
        if arg in _CURL_VALUES:
            _CURL_VALUES[arg](request, value)
        return
    raise CommandError("unparseable_command", f"curl option {arg} is not supported by the importer.")


def _curl_short_cluster(arg: str, queue: list[str], request: _Request) -> None:
    """-sSL, -XPOST, -sX POST, -HName:value: flags, then at most one option taking a value."""
    for i, letter in enumerate(arg[1:], start=1):
        option = "-" + letter
        if option in _CURL_FLAGS:
            continue
        if option in _CURL_SPECIAL_FLAGS:
            _CURL_SPECIAL_FLAGS[option](request)
            continue
        if option in _CURL_VALUES or option in _CURL_IGNORED_VALUES:
            value = arg[i + 1 :] or _take_value(option, queue)
            if option in _CURL_VALUES:
                _CURL_VALUES[option](request, value)
            return
        raise CommandError("unparseable_command", f"curl option {option} is not supported by the importer.")


def _take_value(option: str, queue: list[str]) -> str:
    if not queue:
        raise CommandError("unparseable_command", f"option {option} is missing its value.")
    return queue.pop(0)


# ---------------------------------------------------------------- wget

_WGET_FLAGS = frozenset(
    (
        "-q --quiet -nv --no-verbose -v --verbose --no-check-certificate -S --server-response "
        "--no-cache --content-on-error --delete-after -4 -6 --inet4-only --inet6-only --no-dns-cache "
        "-nc --no-clobber"
    ).split()
)
_WGET_IGNORED_VALUES = frozenset(
    (
        "-O --output-document -o --output-file -a --append-output -T --timeout -t --tries --wait "
        "--waitretry --read-timeout --connect-timeout --dns-timeout"
    ).split()
)


_WGET_VALUES = {
    "--method": _method,
    "--header": _header,
    "--post-data": lambda request, value: _data(request, value, literal=True),
    "--body-data": lambda request, value: _data(request, value, literal=True),
    "-U": _header_option("User-Agent"),
    "--user-agent": _header_option("User-Agent"),
    "--referer": _header_option("Referer"),
}
_WGET_CREDENTIALS = {"--user": 0, "--http-user": 0, "--password": 1, "--http-password": 1}


def _parse_wget(args: list[str], request: _Request) -> None:
    credentials = ["", None]
    queue = list(args)
    while queue:
        arg = queue.pop(0)
        if arg == "--spider":
            request.method = "HEAD"
        elif arg.startswith("--"):
            _wget_long(arg, queue, request, credentials)
        elif arg.startswith("-") and len(arg) > 1:
            _wget_short_cluster(arg, queue, request)
        else:
            _set_url(request, arg)
    if credentials[1] is not None:
        _basic_auth(request, f"{credentials[0]}:{credentials[1]}")
    elif credentials[0]:
        raise CommandError("unparseable_command", "--user without --password cannot be imported.")


def _wget_long(arg: str, queue: list[str], request: _Request, credentials: list) -> None:
    name, eq, value = arg.partition("=")
    if name in _WGET_FLAGS and not eq:
        return
    known = name in _WGET_VALUES or name in _WGET_IGNORED_VALUES or name in _WGET_CREDENTIALS
    if not known:
        raise CommandError("unparseable_command", f"wget option {name} is not supported by the importer.")
    value = value if eq else _take_value(name, queue)
    if name in _WGET_VALUES:
        _WGET_VALUES[name](request, value)
    elif name in _WGET_CREDENTIALS:
        credentials[_WGET_CREDENTIALS[name]] = value


def _wget_short_cluster(arg: str, queue: list[str], request: _Request) -> None:
    """-q, -qO-, -O /dev/null, -nv, -U agent."""
    if arg in _WGET_FLAGS:
        return
    for i, letter in enumerate(arg[1:], start=1):
        option = "-" + letter
        if option in _WGET_FLAGS:
            continue
        if option in _WGET_IGNORED_VALUES or option in _WGET_VALUES:
            value = arg[i + 1 :] or _take_value(option, queue)
            if option in _WGET_VALUES:
                _WGET_VALUES[option](request, value)
            return
        raise CommandError("unparseable_command", f"wget option {option} is not supported by the importer.")
