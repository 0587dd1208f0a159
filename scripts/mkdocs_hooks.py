"""MkDocs hook: the docstrings' Sphinx roles (:class:`~ivm_layer.errors.IVMError`, :meth:`sync`)
rendered as plain code names in the API reference, instead of as raw role text."""

import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]+)</code>")


def on_page_content(html, **kwargs):
    return _ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)
