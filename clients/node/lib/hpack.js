"use strict";
// HPACK (RFC 7541), the header compression of HTTP/2, for lib/h2.js. Pure: bytes in, bytes out.
//
// Encoding is the plainest the RFC allows: every field a literal that is not indexed, its name
// by static-table index where it has one, no Huffman. The client sends a handful of short
// headers per stream and opens one call stream per process, so compression would save a few
// bytes once, and an encoder without a dynamic table has no state to keep in step.
//
// Decoding is the whole of it (static and dynamic tables, size updates, Huffman), since a
// server's encoder (grpc's, nghttp2's) may use any of it.

/** RFC 7541, Appendix A: index 1 is the first entry. */
const STATIC_TABLE = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/** A name's first static-table index, for encoding. */
const STATIC_NAMES = new Map();
STATIC_TABLE.forEach(([name], index) => {
  if (!STATIC_NAMES.has(name)) STATIC_NAMES.set(name, index + 1);
});

// RFC 7541, Appendix B: the length in bits of each symbol's code, octets 0-255 and then EOS
// (256). The code is canonical (codes of one length are consecutive, in symbol order, and
// each length's first code follows the previous length's last), so the lengths define it.
// prettier-ignore
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
  28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5,
  6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6,
  7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23,
  23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22,
  22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22,
  23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27,
  27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25,
  24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];
const EOS = 256;

/** An entry's size in a dynamic table: its octets and 32 (RFC 7541, section 4.1). */
const ENTRY_OVERHEAD = 32;

/** A header block this decoder cannot read: a COMPRESSION_ERROR of the whole connection. */
class HpackError extends Error {}

let huffmanTree = null;

/**
 * The Huffman code as a binary tree in one array, built at the first Huffman string read:
 * node `n`'s children are at `2n` (bit 0) and `2n + 1` (bit 1); a positive entry is a node,
 * `-(symbol + 1)` a leaf, 0 no code.
 */
function tree() {
  if (huffmanTree !== null) return huffmanTree;
  const symbols = HUFFMAN_LENGTHS.map((_, symbol) => symbol);
  symbols.sort((a, b) => HUFFMAN_LENGTHS[a] - HUFFMAN_LENGTHS[b] || a - b);
  const nodes = new Int32Array(2 * 2 * symbols.length);
  let used = 1; // node 0 is the root
  let code = 0;
  let length = HUFFMAN_LENGTHS[symbols[0]];
  symbols.forEach((symbol, index) => {
    if (index > 0) {
      const next = HUFFMAN_LENGTHS[symbol];
      code = (code + 1) * 2 ** (next - length);
      length = next;
    }
    let node = 0;
    for (let bit = length - 1; bit >= 0; bit -= 1) {
      const slot = 2 * node + (Math.floor(code / 2 ** bit) % 2);
      if (bit === 0) nodes[slot] = -(symbol + 1);
      else {
        if (nodes[slot] === 0) nodes[slot] = used++;
        node = nodes[slot];
      }
    }
  });
  huffmanTree = nodes;
  return nodes;
}

/** RFC 7541, section 5.2: the padding is the most significant bits of EOS (all ones), under 8. */
function huffmanDecoded(bytes) {
  const nodes = tree();
  const out = Buffer.allocUnsafe(Math.ceil((bytes.length * 8) / 5)); // 5 bits: the shortest code
  let written = 0;
  let node = 0;
  let depth = 0; // bits read since the last symbol
  let ones = true; // and all of them ones
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit -= 1) {
      const one = (byte >> bit) & 1;
      const next = nodes[2 * node + one];
      depth += 1;
      ones &&= one === 1;
      if (next < 0) {
        const symbol = -next - 1;
        if (symbol === EOS) throw new HpackError("a Huffman string holds EOS");
        out[written++] = symbol;
        node = 0;
        depth = 0;
        ones = true;
      } else if (next === 0) {
        throw new HpackError("a Huffman string holds no valid code");
      } else node = next;
    }
  }
  if (depth > 7 || !ones) throw new HpackError("a Huffman string's padding is not the start of EOS");
  return out.subarray(0, written);
}

/** Append `value` as an integer with an `prefixBits`-bit prefix (RFC 7541, section 5.1). */
function pushInteger(out, value, prefixBits, pattern) {
  const limit = 2 ** prefixBits - 1;
  if (value < limit) {
    out.push(pattern | value);
    return;
  }
  out.push(pattern | limit);
  let rest = value - limit;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
}

function pushString(out, bytes) {
  pushInteger(out, bytes.length, 7, 0);
  for (const byte of bytes) out.push(byte);
}

// HTTP field names (RFC 9110's token, lowercase as HTTP/2 requires, or a pseudo-header) and
// values (visible ASCII, spaces and tabs inside): what gRPC metadata may hold.
const FIELD_NAME = /^:?[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const FIELD_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?$/;

/**
 * A header block for `fields`, `[name, value]` pairs in order.
 * @throws {TypeError} for a name or value HTTP/2 cannot carry.
 */
function encodeHeaders(fields) {
  const out = [];
  for (const [name, value] of fields) {
    if (!FIELD_NAME.test(name)) throw new TypeError(`${JSON.stringify(name)} is not a header name HTTP/2 carries`);
    const text = String(value);
    if (!FIELD_VALUE.test(text)) {
      throw new TypeError(`the header ${name} holds characters HTTP/2 metadata cannot carry`);
    }
    const index = STATIC_NAMES.get(name);
    if (index === undefined) {
      out.push(0); // literal without indexing, a new name
      pushString(out, Buffer.from(name, "latin1"));
    } else pushInteger(out, index, 4, 0);
    pushString(out, Buffer.from(text, "latin1"));
  }
  return Buffer.from(out);
}

/** One connection's decoding state: its dynamic table, newest entry first. */
class HeaderDecoder {
  /**
   * @param {number} tableLimit the SETTINGS_HEADER_TABLE_SIZE this side announced.
   * @param {number} listLimit the most octets of names and values one block may decode to.
   */
  constructor(tableLimit, listLimit) {
    this.tableLimit = tableLimit;
    this.listLimit = listLimit;
    this.maxSize = tableLimit;
    this.size = 0;
    this.entries = [];
  }

  /**
   * @param {Buffer} block a whole header block (HEADERS and its CONTINUATIONs).
   * @returns {Array<[string, string]>} its fields, in order.
   * @throws {HpackError} for a block that breaks the RFC; the connection cannot go on.
   */
  decode(block) {
    const fields = [];
    let listSize = 0;
    let at = 0;
    const integer = (prefixBits) => {
      const limit = 2 ** prefixBits - 1;
      let value = block[at++] & limit;
      if (value < limit) return value;
      for (let shift = 0; ; shift += 7) {
        if (at >= block.length) throw new HpackError("a header block ends inside an integer");
        if (shift > 21) throw new HpackError("a header block holds an integer too large to be meant");
        const byte = block[at++];
        value += (byte & 127) * 2 ** shift;
        if (byte < 128) return value;
      }
    };
    const string = () => {
      if (at >= block.length) throw new HpackError("a header block ends before a string");
      const huffman = (block[at] & 0x80) !== 0;
      const length = integer(7);
      if (at + length > block.length) throw new HpackError("a header block ends inside a string");
      const raw = block.subarray(at, at + length);
      at += length;
      return (huffman ? huffmanDecoded(raw) : raw).toString("latin1");
    };
    while (at < block.length) {
      const first = block[at];
      let field;
      if (first & 0x80) {
        field = this._entry(integer(7)); // indexed
      } else if ((first & 0xe0) === 0x20) {
        if (fields.length > 0) throw new HpackError("a table size update follows a header field");
        const size = integer(5);
        if (size > this.tableLimit) {
          throw new HpackError(`a table size update to ${size}, above the ${this.tableLimit} announced`);
        }
        this.maxSize = size;
        this._evict(0);
        continue;
      } else {
        const indexing = (first & 0xc0) === 0x40; // else without indexing (0000) or never indexed (0001)
        const nameIndex = integer(indexing ? 6 : 4);
        const name = nameIndex === 0 ? string() : this._entry(nameIndex)[0];
        field = [name, string()];
        if (indexing) this._add(field);
      }
      listSize += field[0].length + field[1].length;
      if (listSize > this.listLimit) {
        throw new HpackError(`a header block decodes to more than ${this.listLimit} octets`);
      }
      fields.push(field);
    }
    return fields;
  }

  _entry(index) {
    if (index >= 1 && index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1];
    const entry = this.entries[index - STATIC_TABLE.length - 1];
    if (entry === undefined) throw new HpackError(`a header block names table index ${index}, which is empty`);
    return entry;
  }

  _add(field) {
    const size = field[0].length + field[1].length + ENTRY_OVERHEAD;
    this._evict(size);
    if (size <= this.maxSize) {
      this.entries.unshift(field);
      this.size += size;
    }
  }

  /** Drop the oldest entries until `incoming` more octets fit (all of them if it never will). */
  _evict(incoming) {
    while (this.entries.length > 0 && this.size + incoming > this.maxSize) {
      const [name, value] = this.entries.pop();
      this.size -= name.length + value.length + ENTRY_OVERHEAD;
    }
  }
}

module.exports = { HeaderDecoder, HpackError, encodeHeaders, huffmanDecoded };
