// MathJax 3's configuration (MathJax itself: javascripts/mathjax/, hooks.py). Every page is a
// full load (no instant navigation), so MathJax's start-up typesets it. Notebook pages load
// this file twice (mkdocs-jupyter's "MathJax URL" in mkdocs.yml), both before MathJax.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  // typeset only the formulas of the markdown pages (arithmatex) and the notebooks' text cells
  // (the whole cell: its paragraphs have no class, so an ignore-every-class pattern would skip them)
  options: { ignoreHtmlClass: "md-header|md-container", processHtmlClass: "arithmatex|jp-RenderedMarkdown" },
};
