// The comment form under a published page (/a/{id}): posts the comment, then shows the page
// again with it. A private page was opened with ?access_token=, which the request carries.

const section = document.getElementById("comments");
const form = document.getElementById("comment-form");
const status = document.getElementById("status");
const token = new URLSearchParams(location.search).get("access_token");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = document.getElementById("text").value.trim();
  const author = document.getElementById("author").value.trim();
  if (!text) return;
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  status.textContent = "Sending…";
  try {
    const response = await fetch(`/a/${encodeURIComponent(section.dataset.page)}/comments`, {
      method: "POST",
      headers,
      body: JSON.stringify(author ? { text, author } : { text }),
      cache: "no-store",
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      status.textContent = `Not sent: ${body.error || response.status}`;
      return;
    }
    location.reload();
  } catch (error) {
    status.textContent = `Not sent: ${error.message}`;
  }
});
