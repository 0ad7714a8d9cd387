"use strict";
// Pings on a connection that carries calls, as the Python client's channel sends them (gRPC's
// keepalive, 10 s, 5 s for the answer): a network that drops a connection silently (a cut
// link, a host gone) sends no reset, and TCP would take minutes to give up on it. A ping not
// answered in time says the connection is dead; its calls are then sent again on a new one
// (lib/connection.js). Only while a call is in flight: the daemon tolerates a ping every 5 s
// at most (then it says go away), and a connection with no call needs none.

/** Milliseconds between pings while a call is in flight. */
const KEEPALIVE_TIME = 10000;
/** Milliseconds a ping's answer is waited for before the connection is given up. */
const KEEPALIVE_TIMEOUT = 5000;

class Keepalive {
  /**
   * @param {import("node:http2").ClientHttp2Session} h2 the connection pinged.
   * @param {{ time?: number, timeout?: number }} settings milliseconds (tests shorten them).
   * @param {(why: string) => void} onDead called once a ping goes unanswered.
   */
  constructor(h2, { time = KEEPALIVE_TIME, timeout = KEEPALIVE_TIMEOUT } = {}, onDead) {
    this.h2 = h2;
    this.time = time;
    this.timeout = timeout;
    this.onDead = onDead;
    /** The timer running: the wait for the next ping, or for a ping's answer. */
    this.timer = null;
  }

  /** Ping from now on (a call is in flight). */
  start() {
    if (this.timer === null) this._wait();
  }

  /** No more pings (no call in flight); a ping's late answer is ignored. */
  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  _wait() {
    this.timer = setTimeout(() => this._ping(), this.time).unref();
  }

  _ping() {
    const waiting = setTimeout(() => {
      this.timer = null;
      this.onDead(`no answer to a ping within ${this.timeout / 1000} s`);
    }, this.timeout).unref();
    this.timer = waiting;
    try {
      // Queued until the connection is made, when it is still being made: a connection that
      // never completes is given up as well.
      this.h2.ping((error) => {
        if (this.timer !== waiting) return; // stopped (or started again) meanwhile
        clearTimeout(waiting);
        this.timer = null;
        if (error === null) this._wait(); // else the connection has ended, and says why
      });
    } catch {
      clearTimeout(waiting); // the connection is gone: its end says why
      this.timer = null;
    }
  }
}

module.exports = { KEEPALIVE_TIME, KEEPALIVE_TIMEOUT, Keepalive };
