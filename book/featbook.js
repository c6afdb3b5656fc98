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
