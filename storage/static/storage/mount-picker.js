// The launch wizard's hub step: "Add" puts the repo into the mounts field (comma-separated, once each).
document.addEventListener("click", (event) => {
  const button = event.target.closest(".add-mount-button");
  const field = document.getElementById("id_mounts");
  if (!button || !field) return;
  const repos = field.value.split(/[\s,，]+/).filter(Boolean);
  if (!repos.includes(button.dataset.repo)) repos.push(button.dataset.repo);
  field.value = repos.join(", ");
  button.disabled = true;
});
