"use strict";
// After a lost connection (a network cut, a daemon restarted): how long its calls are sent
// again for, and connecting again until the daemon can be reached, as the Python client's
// channel does (TOOLBRIDGE_RECONNECT_WINDOW; gRPC's reconnect backoff: 0.5 s, 1.6 times more
// each attempt, at most 3 s, with jitter). lib/connection.js sends the calls again.

const RECONNECT_VARIABLE = "TOOLBRIDGE_RECONNECT_WINDOW";
/**
 * Seconds a call whose connection was lost is tried again for, on new connections, before it
 * fails with a retryable `Unavailable` (TOOLBRIDGE_RECONNECT_WINDOW overrides it).
 */
const RECONNECT_WINDOW = 60;
const INITIAL_BACKOFF = 500;
const MAX_BACKOFF = 3000;
const MULTIPLIER = 1.6;
const JITTER = 0.2;
/**
 * Milliseconds one attempt may take to be ready (TCP, TLS, the daemon's HTTP/2 settings)
 * before another starts. Short, so that a link that heals is found soon: a connection's
 * first SYN retransmissions come 1 and 3 s after it, later ones tens of seconds apart.
 */
const CONNECT_TIMEOUT = 5000;

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;

/**
 * The reconnect window, in seconds, from `env` (as the Python client reads it: a number of
 * seconds, at least 0; the default when unset or unreadable).
 * @param {Record<string, string | undefined>} env
 */
function reconnectWindow(env) {
  const text = (env[RECONNECT_VARIABLE] ?? "").trim();
  if (text === "") return RECONNECT_WINDOW;
  let seconds;
  if (/^[+-]?inf(?:inity)?$/i.test(text)) seconds = text.startsWith("-") ? -Infinity : Infinity;
  else if (/^[+-]?nan$/i.test(text)) seconds = 0; // Python's max(0.0, nan)
  else if (NUMBER.test(text)) seconds = Number(text);
  else return RECONNECT_WINDOW;
  return Math.max(0, seconds);
}

/** `seconds` as Python's `format(seconds, "g")` writes it, for messages (1 -> "1", 0.5 -> "0.5"). */
function formatSeconds(seconds) {
  if (seconds === Infinity) return "inf";
  return String(Number(seconds.toPrecision(6)));
}

/**
 * Connect `channel` (lib/transport.js) again and again, `backoff` apart, until a session is
 * ready for calls (the daemon has sent its HTTP/2 settings): then `onReady()`, once.
 * @returns {() => void} stops trying; an attempt under way is dropped.
 */
function whenReady(channel, onReady) {
  let backoff = INITIAL_BACKOFF;
  let timer = null;
  let attempt = null; // { session, cleanup }

  const start = () => {
    timer = null;
    const started = performance.now();
    const session = channel.session();
    if (session.heard && session.usable()) {
      onReady();
      return;
    }
    const { h2 } = session;
    const cleanup = () => {
      clearTimeout(slow);
      h2.off("remoteSettings", ready);
      h2.off("close", closed);
      attempt = null;
    };
    const ready = () => {
      cleanup();
      if (session.usable()) onReady();
      else retry(started);
    };
    const closed = () => {
      cleanup();
      retry(started);
    };
    const slow = setTimeout(() => session.lost(`not connected within ${CONNECT_TIMEOUT / 1000} s`), CONNECT_TIMEOUT);
    h2.once("remoteSettings", ready);
    h2.once("close", closed);
    attempt = { session, cleanup };
  };

  // The next attempt starts `backoff` after the last one started, and never before it ended.
  const retry = (started) => {
    const wait = backoff * (1 + JITTER * (2 * Math.random() - 1));
    backoff = Math.min(backoff * MULTIPLIER, MAX_BACKOFF);
    timer = setTimeout(start, Math.max(0, started + wait - performance.now()));
  };

  start();
  return () => {
    clearTimeout(timer);
    timer = null;
    if (attempt !== null) {
      const { session, cleanup } = attempt;
      cleanup();
      if (!session.heard) session.lost("no longer waited for");
    }
  };
}

module.exports = { CONNECT_TIMEOUT, RECONNECT_VARIABLE, RECONNECT_WINDOW, formatSeconds, reconnectWindow, whenReady };
