"""The fixed parts of the timeline page (``subagents runs timeline``): its style, its script, its colours.

The script only shows a tooltip: it copies an element's ``data-tip`` attribute into a box with
``textContent`` (never as HTML), so no text from a run can become markup.  The page's Content Security
Policy allows this one script (by its hash) and nothing from the network.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["CSP", "OUTCOME_COLOURS", "RUNNING_COLOUR", "SCRIPT", "STYLE"]

#: Bar colours by outcome (a run still going has no outcome yet: :data:`RUNNING_COLOUR`).
OUTCOME_COLOURS: dict[str, str] = {
    "ok": "#2e9d5b",
    "error": "#d64545",
    "timeout": "#e07b22",
    "limit": "#d9a51c",
    "cancelled": "#8a8f98",
    "interrupted": "#8e5bc4",
}
RUNNING_COLOUR = "#3a7bd5"

STYLE = """
:root { color-scheme: light; }
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px 20px; color: #1d2330;
       background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px; }
.sub { color: #5b6270; margin: 0 0 12px; white-space: pre-wrap; word-break: break-word; }
svg { display: block; overflow: visible; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
svg .axis text { fill: #6b7280; font-size: 11px; }
svg .axis line { stroke: #e5e7eb; }
svg .stripe { fill: #f7f8fa; }
svg .type { fill: #6b7280; font-size: 11px; }
svg .link { stroke: #9aa3b2; stroke-width: 1; stroke-dasharray: 2 2; }
svg .wait { fill: #cfd6e2; }
svg .bar { stroke: rgba(0,0,0,.25); stroke-width: .5; cursor: default; }
svg .running { fill: url(#going); }
svg .mark { stroke-width: 1.3; cursor: default; }
svg .model { stroke: #1f3b73; }
svg .tool { stroke: #3d2d00; }
svg .tool.err { stroke: #8b0000; fill: #ffb3b3; }
svg .announce { stroke: #5a189a; fill: #e0c3fc; }
svg .exact { fill: #fff; }
svg .model.exact { fill: #1f3b73; }
svg .tool.exact { fill: #3d2d00; }
svg .tool.err.exact { fill: #d00000; }
svg .guess { fill: #fff; stroke-dasharray: 1.5 1; }
svg [data-tip]:hover { filter: brightness(1.15); }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 10px 0 4px; color: #374151; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
.sw { width: 14px; height: 10px; border-radius: 2px; display: inline-block; }
.note { color: #6b7280; margin: 4px 0 16px; max-width: 1100px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e5e7eb; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.all td { font-weight: 600; border-top: 2px solid #cbd2dc; }
#tip { position: fixed; z-index: 10; max-width: 520px; padding: 8px 10px; border-radius: 6px;
       background: #111827; color: #f9fafb; font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace;
       white-space: pre-wrap; word-break: break-word; pointer-events: none; box-shadow: 0 4px 14px rgba(0,0,0,.3); }
#tip[hidden] { display: none; }
"""

SCRIPT = """
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function place(x, y) {
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = x + 14, top = y + 14;
    if (left + w > window.innerWidth - 4) { left = Math.max(4, x - w - 14); }
    if (top + h > window.innerHeight - 4) { top = Math.max(4, y - h - 14); }
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  function show(el, x, y) {
    tip.textContent = el.getAttribute("data-tip");
    tip.hidden = false;
    place(x, y);
  }
  document.addEventListener("mousemove", function (e) {
    var el = e.target instanceof Element ? e.target.closest("[data-tip]") : null;
    if (el) { show(el, e.clientX, e.clientY); } else { tip.hidden = true; }
  });
  document.addEventListener("focusin", function (e) {
    var el = e.target instanceof Element ? e.target.closest("[data-tip]") : null;
    if (!el) { tip.hidden = true; return; }
    var r = el.getBoundingClientRect();
    show(el, r.left, r.bottom);
  });
  document.addEventListener("mouseleave", function () { tip.hidden = true; });
})();
"""


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


#: Nothing from the network; the page's own style and its one script (by hash) only.
CSP = (f"default-src 'none'; style-src 'unsafe-inline'; script-src '{_hash(SCRIPT)}'; base-uri 'none'; "
       "form-action 'none'")
