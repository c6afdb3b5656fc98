// The FeAT book's page script (staged by featbook.build beside featbook.css).
// Figures: a tap (or click) opens the figure alone at full size, where a phone can zoom into it.
// On a 390 px screen a multi-panel figure is scaled to the column and its labels are a few pixels
// high; the image file itself is drawn at the size it was saved. Sphinx already links a scaled
// figure to its file (a.image-reference): that link is marked; any other figure is wrapped in one.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_output img, figure img").forEach((img) => {
    if (!img.getAttribute("src")) return;
    let link = img.closest("a");
    if (link && !link.classList.contains("image-reference")) return;  // a link to somewhere else
    if (!link) {
      link = document.createElement("a");
      link.href = img.getAttribute("src");
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
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
// re-checked when the window changes size and as the box scrolls.
function featMarkWideTables() {
  document.querySelectorAll("div.feat-table-scroll, div.pst-scrollable-table-container").forEach((box) => {
    const wide = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("feat-overflows", wide);
    box.classList.toggle("feat-scrolled-to-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
    let hint = box.nextElementSibling;
    if (!(hint && hint.classList.contains("feat-scroll-hint"))) {
      if (!wide) return;
      hint = document.createElement("p");
      hint.className = "feat-scroll-hint";
      hint.textContent = "\u2194 More columns: swipe the table sideways";
      box.after(hint);
      box.addEventListener("scroll", () => box.classList.toggle(
        "feat-scrolled-to-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1), { passive: true });
    }
    hint.hidden = !wide;
  });
}
document.addEventListener("DOMContentLoaded", featMarkWideTables);
window.addEventListener("load", featMarkWideTables);
window.addEventListener("resize", featMarkWideTables);
