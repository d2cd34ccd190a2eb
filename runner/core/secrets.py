"""Which configuration values are secrets: one rule for the messages that must not show them and the files that
must not hold them.

A value is secret when

- it sits under an option name that names a credential, at any depth of nested dicts and lists: a name holding
  ``secret``, ``password``, ``passwd`` or ``credential`` anywhere, ending a word with ``key`` or ``token`` (``key``,
  ``account_key``, ``aws_access_key_id``, ``AccessKeyId``, ``apikey``, ``sas_token``; not ``keyring`` or
  ``max_tokens``), holding the word ``sas``, or naming a connection string (``connection_string``, ``conn_str``).
  These are the credential options of s3fs (``key``, ``secret``, ``token``; ``client_kwargs.aws_secret_access_key``
  ...), gcsfs (``token``), adlfs (``account_key``, ``sas_token``, ``client_secret``, ``connection_string``) and the
  ``password`` of ftp, sftp and smb. Everything under such a name is secret (a gcsfs ``token`` given as a dict of
  service-account fields, for example);
- it is the password of a URL with credentials (``scheme://user:password@host``), under any name;
- it is the secret part of a connection string (Azure's ``AccountKey=``, ``SharedAccessKey=``,
  ``SharedAccessSignature=``, a database's ``Password=``/``Pwd=``, up to the next ``;``, space or quote), under any
  name;
- it is the signature of an Azure shared access signature (``sig=`` in a SAS token or a SAS URL's query,
  ``...?sv=2022-11-02&sp=r&sig=...``), under any name: the signature is what grants access (Azure Storage docs,
  "Create a service SAS", the ``signature`` field).

Other options (``endpoint_url``, ``region_name``, ``anon``) are not secret, so messages keep them readable.

:func:`find` lists the secrets of an options dict (for refusing to write them), :func:`mask` hides them in a message.
The patterns :data:`SECRET_NAME` and :data:`SECRET_VALUE` are plain regular expressions (no look-around, no inline
flags), so the chart's ``values.schema.json`` uses the same ones: JSON Schema's ECMA-262, Go's RE2 (Helm) and
Python's ``re`` read them alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

MASK = "***"


def anycase(word: str) -> str:
    """``key`` -> ``[kK][eE][yY]``: a pattern matching ``word`` in any letter case without an inline flag, which
    JSON Schema patterns do not allow."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


# A word ends at the end of the name, at a character that is not a lower-case letter (``_``, ``-``, ``.``, a digit)
# or at an upper-case letter (camelCase: ``AccessKeyId``).
_WORD_END = "($|[^a-z])"
_ANYWHERE = ("secret", "password", "passwd", "credential", "connection_string", "connectionstring", "conn_str",
             "connstr")
_WORD_ENDING = ("key", "token")
_WHOLE_WORD = ("sas",)

SECRET_NAME = "|".join(
    [anycase(w) for w in _ANYWHERE]
    + [f"{anycase(w)}{_WORD_END}" for w in _WORD_ENDING]
    + [f"(^|[^a-zA-Z]){anycase(w)}{_WORD_END}|[a-z0-9]{w.upper()}{_WORD_END}|[a-z0-9]{w.capitalize()}{_WORD_END}"
       for w in _WHOLE_WORD]
)
"""An option name that names a credential (searched anywhere in the name)."""

_URL_PASSWORD = r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@\s:]*:([^/?#@\s]+)@"
_CONNECTION_SECRET = ("(^|[^a-zA-Z0-9])(" + "|".join(anycase(name) for name in (
    "AccountKey", "SharedAccessKey", "SharedAccessSignature", "Password", "Pwd")) + ")=([^;\\s'\"]+)")
_SAS_SIGNATURE = "(^|[?&])" + anycase("sig") + "=([^&;\\s'\"#]+)"
SECRET_VALUE = f"{_URL_PASSWORD}|{_CONNECTION_SECRET}|{_SAS_SIGNATURE}"
"""A string that holds a secret whatever its option's name: a URL with a password, a connection string's key, a
shared access signature's ``sig=``."""

_NAME = re.compile(SECRET_NAME)
_URL = re.compile(_URL_PASSWORD)
_CONNECTION = re.compile(_CONNECTION_SECRET)
_SAS = re.compile(_SAS_SIGNATURE)


class Secret(NamedTuple):
    """One secret found in options: where (``client_kwargs.aws_secret_access_key``, ``conn[0]``), its value, and
    why it is one, as a phrase that follows the path in a message."""

    path: str
    value: str
    why: str


def is_secret_name(name: str) -> bool:
    """Whether an option named ``name`` holds a credential (see the module docstring)."""
    return _NAME.search(name) is not None


def find(options: Any, path: str = "") -> list[Secret]:
    """Every secret in ``options`` (a dict of options, at any depth of nested dicts, lists and tuples), in order.

    Args:
        options: the options; a dict's keys are option names.
        path: the dotted path of ``options`` itself, prefixed to each secret's path.

    Returns:
        The secrets: under a secret name every non-empty string or number (``why``: "looks like a credential"); in
        any string, a URL's password and a connection string's key (``why``: "holds a password in its URL", "holds
        a secret in its connection string"), so that a message quoting only that part is masked too.
    """
    return list(_find(options, path, secret=False))


def _find(value: Any, path: str, secret: bool) -> Iterator[Secret]:
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _find(item, f"{path}.{name}" if path else str(name), secret or is_secret_name(str(name)))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _find(item, f"{path}[{index}]", secret)
    elif isinstance(value, bool) or value is None or value == "":
        return
    else:
        if secret:
            yield Secret(path, str(value), "looks like a credential")
        text = value if isinstance(value, str) else ""
        for match in _URL.finditer(text):
            yield Secret(path, match.group(1), "holds a password in its URL")
        for match in _CONNECTION.finditer(text):
            yield Secret(path, match.group(3), "holds a secret in its connection string")
        for match in _SAS.finditer(text):
            yield Secret(path, match.group(2), "holds the signature of a shared access signature (sig=)")


def mask(text: str, options: Any = None) -> str:
    """``text`` with every secret of ``options`` (:func:`find`) replaced by ``***``, and with the password of any URL,
    the key of any connection string and any shared access signature's ``sig=`` in ``text`` itself masked too (a URI
    with credentials in a message).

    The longest secrets are replaced first, so a secret that contains another is masked whole.
    """
    for secret in sorted({s.value for s in find(options)} if options else (), key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _URL.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + MASK + "@", text)
    text = _CONNECTION.sub(lambda m: m.group(0)[: m.start(3) - m.start(0)] + MASK, text)
    return _SAS.sub(lambda m: m.group(0)[: m.start(2) - m.start(0)] + MASK, text)


def redact(value: Any, secret: bool = False) -> Any:
    """A copy of ``value`` (a dict of options or settings, at any depth) fit to be written down: every value under a
    secret name replaced by ``***``, and the password of a URL, the key of a connection string and a SAS's ``sig=``
    masked in every other string (``s3://user:***@host/bucket``). Used for everything a run writes about its
    configuration (``run.json``)."""
    if isinstance(value, dict):
        return {name: redact(item, secret or is_secret_name(str(name))) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item, secret) for item in value]
    if secret and value not in (None, "") and not isinstance(value, bool):
        return MASK
    return mask(value) if isinstance(value, str) else value
