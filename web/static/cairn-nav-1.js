// Copy buttons beside IDs: the ID stays selectable text, the button puts it
// on the clipboard in one click and says so.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
