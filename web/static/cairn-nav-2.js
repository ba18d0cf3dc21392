// Copy buttons beside IDs: the ID stays selectable text, the button puts it
// on the clipboard in one click and says so. A data-copy that names an
// element on the page (the run header's run-id, the CLI block) is copied
// from that element by cairn-3.js; copying the name itself here would
// overwrite it.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  if (document.getElementById(button.getAttribute("data-copy"))) return;
  navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
