// The FeAT book's page script (staged by featbook.build beside featbook.css).
// Figures: a tap (or click) opens the figure alone at full size, where a phone can zoom into it.
// On a 390 px screen a figure shows its phone drawing (featbook.phone), or, a grid of pictures,
// scales to the column; the link opens the laptop drawing at the size it was saved. Sphinx already links a scaled
// figure to its file (a.image-reference): that link is marked; any other figure is wrapped in one.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_output img, figure img").forEach((img) => {
    if (!img.getAttribute("src")) return;
    let link = img.closest("a");
    if (link && !link.classList.contains("image-reference")) return;  // a link to somewhere else
    if (!link) {
      // a figure with a phone drawing (featbook.phone) is a <picture>: the link wraps the picture,
      // whose <source> applies only to an <img> that is its own child
      const target = img.parentElement && img.parentElement.tagName === "PICTURE" ? img.parentElement : img;
      link = document.createElement("a");
      link.href = img.getAttribute("src");
      target.parentNode.insertBefore(link, target);
      link.appendChild(target);
    }
    link.target = "_blank";
    link.rel = "noopener";
    link.classList.add("feat-enlarge");
    link.title = "Open the figure at full size";
  });
});

// Tables: on a phone a wide table (Table 7's six columns) scrolls sideways inside its own box, and
// nothing else tells a reader that columns lie beyond the edge. A box that holds more than it shows
// is marked (feat-overflows: a shadow at the edge with more to see) and a line under it says so;
// re-checked when the window changes size and as the box scrolls. Display equations wider than the
// column (Eq. (7) on a phone) scroll in their own box too and get the same shadow and a line of
// their own class (feat-equation-hint), checked again once MathJax has typeset them.
function featMarkWideBoxes(selector, hintClass, text, outer = null) {
  document.querySelectorAll(selector).forEach((box) => {
    const wide = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("feat-overflows", wide);
    box.classList.toggle("feat-scrolled-to-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
    const place = (outer && box.closest(outer)) || box;  // the line goes under this element
    let hint = place.nextElementSibling;
    if (!(hint && hint.classList.contains(hintClass))) {
      if (!wide) return;
      hint = document.createElement("p");
      hint.className = hintClass;
      hint.textContent = text;
      place.after(hint);
      box.addEventListener("scroll", () => box.classList.toggle(
        "feat-scrolled-to-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1), { passive: true });
    }
    hint.hidden = !wide;
  });
}
function featMarkWideTables() {
  featMarkWideBoxes("div.feat-table-scroll, div.pst-scrollable-table-container", "feat-scroll-hint",
                    "\u2194 More columns: swipe the table sideways");
  // MathJax's display container is the box that scrolls (its own CSS), not Sphinx's div.math around it
  // (the line goes under div.math: inside it, Sphinx's layout would set it beside the equation)
  featMarkWideBoxes('mjx-container[display="true"]', "feat-equation-hint",
                    "\u2194 The equation continues: swipe it sideways", "div.math");
}
window.addEventListener("load", () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(featMarkWideTables);
});
document.addEventListener("DOMContentLoaded", featMarkWideTables);
window.addEventListener("load", featMarkWideTables);
window.addEventListener("resize", featMarkWideTables);
