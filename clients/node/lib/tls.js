"use strict";
// TLS to a daemon on another host, from the environment alone: TOOLBRIDGE_TLS_CA (a CA file to
// trust), TOOLBRIDGE_TLS_CERT and TOOLBRIDGE_TLS_KEY (this client's certificate, for mutual
// TLS). The contract, shared with the Python client:
//
// - TLS is used when TOOLBRIDGE_ADDRESS is `tls://HOST:PORT` (what `toolbridge serve` prints
//   when it serves TLS) or when a CA is set: a client given a CA never speaks clear text, the
//   address notwithstanding.
// - `tls://` without a CA trusts Node's default CAs (its bundled roots, and NODE_EXTRA_CA_CERTS).
// - A certificate without a CA or `tls://` is refused rather than ignored: whoever set it
//   expects TLS.
// - A certificate problem is one line naming what is wrong (expired, another host's, an
//   unknown CA, a client certificate demanded or refused) and the variable that fixes it.
//
// Loaded with the connection, at a command's first call.

const fs = require("node:fs");
const net = require("node:net");
const tls = require("node:tls");

const CA_VARIABLE = "TOOLBRIDGE_TLS_CA";
const CERT_VARIABLE = "TOOLBRIDGE_TLS_CERT";
const KEY_VARIABLE = "TOOLBRIDGE_TLS_KEY";

function readSetting(env, variable) {
  const file = env[variable] ?? "";
  if (file === "") return undefined;
  try {
    return { file, bytes: fs.readFileSync(file) };
  } catch (error) {
    throw new TypeError(`${variable}=${file}: cannot read it (${error.code ?? error.message})`);
  }
}

/**
 * The TLS settings the environment asks for, or null for clear text.
 * @param {Record<string, string | undefined>} env
 * @param {string} address TOOLBRIDGE_ADDRESS.
 * @returns {{ ca?: Buffer, cert?: Buffer, key?: Buffer, caFile?: string, certFile?: string } | null}
 * @throws {TypeError} naming the variable at fault.
 */
function tlsSettings(env, address) {
  const ca = readSetting(env, CA_VARIABLE);
  const wanted = address.startsWith("tls://") || ca !== undefined;
  const certSet = Boolean(env[CERT_VARIABLE]);
  const keySet = Boolean(env[KEY_VARIABLE]);
  if (certSet !== keySet) {
    const [set, unset] = certSet ? [CERT_VARIABLE, KEY_VARIABLE] : [KEY_VARIABLE, CERT_VARIABLE];
    throw new TypeError(`${set} is set but ${unset} is not: a client certificate needs both`);
  }
  if (!wanted) {
    if (certSet) {
      throw new TypeError(
        `${CERT_VARIABLE} is set, but the address is not tls:// and ${CA_VARIABLE} is not set: ` +
          "this client would speak clear text; use the tls:// address the daemon prints",
      );
    }
    return null;
  }
  const settings = {};
  if (ca !== undefined) Object.assign(settings, { ca: ca.bytes, caFile: ca.file });
  if (certSet) {
    const cert = readSetting(env, CERT_VARIABLE);
    const key = readSetting(env, KEY_VARIABLE);
    Object.assign(settings, { cert: cert.bytes, key: key.bytes, certFile: cert.file });
  }
  return settings;
}

/**
 * A TLS connection to `where` (`{ host, port }` or `{ path }`), checked against the host of
 * `target` (a parsed address), speaking HTTP/2 by ALPN as gRPC servers require.
 */
function secureSocket(where, target, settings) {
  const options = { ...where, ALPNProtocols: ["h2"] };
  for (const name of ["ca", "cert", "key"]) if (settings[name] !== undefined) options[name] = settings[name];
  // SNI names a host, never an address; the certificate is checked against either.
  const host = target.host ?? "localhost";
  if (net.isIP(host) === 0) options.servername = host;
  try {
    return tls.connect(options);
  } catch (error) {
    // A key or certificate OpenSSL cannot read: told as the connection's failure.
    const socket = new net.Socket();
    process.nextTick(() => socket.destroy(error));
    return socket;
  }
}

const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
]);
// What a server that wants a client certificate answers one that sent none (TLS 1.3, 1.2).
const CERTIFICATE_DEMANDED = new Set([
  "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED",
  "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE",
]);
// What it answers a client certificate it does not accept.
const CERTIFICATE_REFUSED = new Set([
  "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
  "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN",
  "ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR",
  "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE_WITH_CERT",
]);

/**
 * What went wrong with TLS, in one line, or null when `error` is not a TLS failure (or the
 * connection is clear text).
 * @param {Error & { code?: string, reason?: string }} error the connection's error.
 */
function connectionFailure(error, settings) {
  if (settings === null) return null;
  const code = error.code ?? "";
  const trusted = settings.caFile === undefined ? "Node's default CAs" : `${CA_VARIABLE}=${settings.caFile}`;
  if (code === "CERT_HAS_EXPIRED") return "its TLS certificate has expired";
  if (code === "CERT_NOT_YET_VALID") return "its TLS certificate is not valid yet";
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return `its TLS certificate is for another host (${String(error.reason ?? error.message).replace(/\s+/g, " ")})`;
  }
  if (UNTRUSTED.has(code)) {
    const fix = settings.caFile === undefined ? `; set ${CA_VARIABLE} to the CA that signed it` : "";
    return `its TLS certificate is signed by a CA this client does not trust (${trusted})${fix}`;
  }
  if (CERTIFICATE_DEMANDED.has(code) && settings.cert === undefined) {
    return `it demands a client certificate: set ${CERT_VARIABLE} and ${KEY_VARIABLE}`;
  }
  if (CERTIFICATE_REFUSED.has(code) || CERTIFICATE_DEMANDED.has(code)) {
    return `it refused this client's certificate (${CERT_VARIABLE}=${settings.certFile}): ${code}`;
  }
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || code === "ERR_SSL_PACKET_LENGTH_TOO_LONG") {
    return "it does not speak TLS there (a clear-text daemon?)";
  }
  if (code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_") || code.startsWith("ERR_OSSL_")) {
    return `TLS failed: ${code}: ${error.message.split("\n")[0]}`;
  }
  return null;
}

/**
 * Why a daemon closed a TLS connection once the handshake was done and before a word of
 * HTTP/2: what a gRPC server (BoringSSL) does, with no alert this side can read, when it wants
 * a client certificate and got none, or one it does not accept.
 */
function closedAfterHandshake(settings) {
  const closed = "it closed the connection after the TLS handshake, before HTTP/2";
  if (settings.cert === undefined) {
    return `${closed}, as a daemon that demands a client certificate does: set ${CERT_VARIABLE} and ${KEY_VARIABLE}`;
  }
  return `${closed}, as a daemon that refuses this client's certificate does (${CERT_VARIABLE}=${settings.certFile})`;
}

module.exports = {
  CA_VARIABLE,
  CERT_VARIABLE,
  KEY_VARIABLE,
  closedAfterHandshake,
  connectionFailure,
  secureSocket,
  tlsSettings,
};
