// An agent's Markdown as page nodes. The vendored markdown-it (markdown-it.min.js) only parses, with raw HTML
// off; the nodes are built here with createElement and textContent, never innerHTML, from an allow-list of
// tags. So nothing an agent writes becomes markup of its own: a <script> or an onclick stays text, a link
// goes only to an absolute http(s) or mailto address (no javascript:, data: or this server's API), and an
// image is left a plain link, so a message never makes the browser fetch anything by itself.
"use strict";

const MD = window.markdownit({ html: false, linkify: false, typographer: false }).disable(["image"]);
const MD_TAGS = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "em", "strong",
                         "s", "a", "table", "thead", "tbody", "tr", "th", "td"]);
const MD_SCHEMES = new Set(["http:", "https:", "mailto:"]);

function safeHref(href) {
  try {
    const url = new URL(href);  // only absolute addresses: a relative one would reach this server's API
    return MD_SCHEMES.has(url.protocol) ? url.href : null;
  } catch (e) {
    return null;
  }
}

// `text` as Markdown, appended to `box` (whose old children are replaced).
function renderMarkdown(box, text) {
  const stack = [box];
  const put = (node) => stack[stack.length - 1].append(node);
  const walk = (tokens) => {
    for (const t of tokens) {
      if (t.type === "inline") { walk(t.children || []); continue; }
      if (t.nesting === 1) {
        if (t.hidden) continue;  // a tight list's paragraphs
        const node = document.createElement(MD_TAGS.has(t.tag) ? t.tag : "span");
        if (t.tag === "a") {
          const href = safeHref(t.attrGet("href") || "");
          if (href) { node.href = href; node.rel = "noopener noreferrer nofollow"; node.target = "_blank"; }
        } else if (t.tag === "ol" && t.attrGet("start")) {
          node.start = Number(t.attrGet("start")) || 1;
        }
        put(node);
        stack.push(node);
        continue;
      }
      if (t.nesting === -1) {
        if (!t.hidden && stack.length > 1) stack.pop();
        continue;
      }
      switch (t.type) {
        case "code_inline": { const c = document.createElement("code"); c.textContent = t.content; put(c); break; }
        case "fence": case "code_block": {
          const pre = document.createElement("pre");
          const code = document.createElement("code");
          code.textContent = t.content.replace(/\n$/, "");
          pre.append(code);
          put(pre);
          break;
        }
        case "hardbreak": case "softbreak": put(document.createElement("br")); break;  // a chat keeps its lines
        case "hr": put(document.createElement("hr")); break;
        default: if (t.content) put(document.createTextNode(t.content));  // text, and anything else as text
      }
    }
  };
  box.replaceChildren();
  walk(MD.parse(String(text), {}));
}
