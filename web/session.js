// The browser's session with this air server (docs/tracking.md, "The web UI"). The session
// lives in this origin's localStorage — an origin includes the port, so no page served from
// another port of this machine can read it — and goes to the server as the X-Air-Session header
// of every API call, never as a cookie (cookies of 127.0.0.1 go to every port). The page
// /login#code=C, opened through `air ui`'s private file, trades the one-time code for a session
// and returns to the page asked for before logging in. Loaded before app.js (uses its el()).
"use strict";

const SESSION_KEY = "air_session";
const NEXT_KEY = "air_next";

class LoginNeeded extends Error {}

function storedSession() {
  return localStorage.getItem(SESSION_KEY) || "";
}

// fetch() with the session; a 401 (the session expired, or the server restarted) forgets it.
async function airFetch(url, init = {}) {
  const session = storedSession();
  if (!session) throw new LoginNeeded("This browser is not logged in to this air server.");
  const headers = new Headers(init.headers || {});
  headers.set("X-Air-Session", session);
  const res = await fetch(url, { ...init, headers, credentials: "omit" });
  if (res.status === 401) {
    localStorage.removeItem(SESSION_KEY);
    throw new LoginNeeded("This browser's session with this air server has ended.");
  }
  return res;
}

const NEXT_MS = 15 * 60 * 1000;  // a page asked for longer ago is not returned to

// The page of this UI to return to after logging in: one asked for in the last NEXT_MS, a path
// on this origin, never another host ("//host"); else the runs page.
function pageToReturnTo() {
  let next = null;
  try { next = JSON.parse(localStorage.getItem(NEXT_KEY)); } catch (err) { next = null; }
  localStorage.removeItem(NEXT_KEY);
  const fresh = next && typeof next.page === "string" && Date.now() - next.at < NEXT_MS;
  return fresh && /^\/(?![/\\])/.test(next.page) ? next.page : "/";
}

// Says how to log in, and remembers this page to come back to after `air ui`.
function showLoginNeeded(main, why) {
  const here = location.pathname + location.search + location.hash;
  if (location.pathname !== "/login") {
    localStorage.setItem(NEXT_KEY, JSON.stringify({ page: here, at: Date.now() }));
  }
  main.replaceChildren(
    el("h1", {}, "Log in"),
    el("p", { id: "login-needed" }, why, " On the machine this air server runs on, run ",
       el("code", {}, "air ui"), ": it opens a private page that logs this browser in, and you " +
       "come back here (", el("code", {}, here === "/login" ? "/" : here), ")."),
    el("p", { class: "muted" }, "A browser on another machine (an ssh tunnel to this port) " +
       "opens the address written in the file `air ui` prints."));
  document.body.dataset.ready = "login";
}

// /login#code=C: the code leaves the address bar first, then becomes a session.
async function completeLogin(main) {
  const code = new URLSearchParams(location.hash.slice(1)).get("code") || "";
  history.replaceState(null, "", "/login");
  const res = await fetch("/login", {
    method: "POST", credentials: "omit", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ code }),
  });
  const body = await res.json();
  if (!res.ok && !storedSession()) return showLoginNeeded(main, body.message || res.statusText);
  if (res.ok) localStorage.setItem(SESSION_KEY, body.session);
  location.replace(pageToReturnTo());
}
