// Typesets the math that pymdownx.arithmatex leaves as \( \) and \[ \] in elements of class "arithmatex", and the
// $ $ and $$ $$ math of the notebook pages' Markdown cells (mkdocs-jupyter leaves it as text), with the KaTeX
// vendored beside this file (no network). Material's instant navigation re-runs it per page.
function renderMath() {
  for (const element of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\[", right: "\\]", display: true },
        { left: "\\(", right: "\\)", display: false },
      ],
      throwOnError: false,
    });
  }
  for (const element of document.querySelectorAll(".jp-MarkdownCell")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "$$", right: "$$", display: true },
        { left: "$", right: "$", display: false },
      ],
      throwOnError: false,
    });
  }
}
if (typeof document$ !== "undefined") {
  document$.subscribe(renderMath);
} else {
  document.addEventListener("DOMContentLoaded", renderMath);
}
