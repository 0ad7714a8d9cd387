"use strict";
// lib/hpack.js on bytes alone: the examples of RFC 7541 Appendix C (the same header blocks
// decoded in sequence, so the dynamic table carries from one to the next), what the encoder
// writes, and every block the decoder refuses.

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { HeaderDecoder, HpackError, encodeHeaders, huffmanDecoded } = require("../lib/hpack");

const hex = (text) => Buffer.from(text.replace(/\s+/g, ""), "hex");
const decoder = (tableLimit = 4096, listLimit = 65536) => new HeaderDecoder(tableLimit, listLimit);

test("RFC 7541 C.4: requests with Huffman strings, the table carried from one to the next", () => {
  const d = decoder();
  assert.deepEqual(d.decode(hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")), [
    [":method", "GET"],
    [":scheme", "http"],
    [":path", "/"],
    [":authority", "www.example.com"],
  ]);
  assert.equal(d.size, 57);
  assert.deepEqual(d.decode(hex("8286 84be 5886 a8eb 1064 9cbf")), [
    [":method", "GET"],
    [":scheme", "http"],
    [":path", "/"],
    [":authority", "www.example.com"],
    ["cache-control", "no-cache"],
  ]);
  assert.equal(d.size, 110);
  assert.deepEqual(d.decode(hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")), [
    [":method", "GET"],
    [":scheme", "https"],
    [":path", "/index.html"],
    [":authority", "www.example.com"],
    ["custom-key", "custom-value"],
  ]);
  assert.equal(d.size, 164);
  assert.deepEqual(d.entries, [
    ["custom-key", "custom-value"],
    ["cache-control", "no-cache"],
    [":authority", "www.example.com"],
  ]);
});

test("RFC 7541 C.6: responses that evict from a 256-octet table", () => {
  // The RFC's peer announced a 256-octet table; here the encoder says so with a size update
  // (3fe101) at the start of its first block, within the 4096 this side announced.
  const d = decoder();
  const date = "Mon, 21 Oct 2013 20:13:21 GMT";
  assert.deepEqual(
    d.decode(
      hex(`3fe101 4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e
        919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3`),
    ),
    [
      [":status", "302"],
      ["cache-control", "private"],
      ["date", date],
      ["location", "https://www.example.com"],
    ],
  );
  assert.equal(d.size, 222);
  assert.deepEqual(d.decode(hex("4883 640e ffc1 c0bf")), [
    [":status", "307"],
    ["cache-control", "private"],
    ["date", date],
    ["location", "https://www.example.com"],
  ]);
  assert.equal(d.size, 222); // :status 307 went in, :status 302 went out
  const third = d.decode(
    hex(`88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d
      d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07`),
  );
  assert.deepEqual(third, [
    [":status", "200"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:22 GMT"],
    ["location", "https://www.example.com"],
    ["content-encoding", "gzip"],
    ["set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"],
  ]);
  assert.equal(d.size, 215);
  assert.deepEqual(
    d.entries.map(([name]) => name),
    ["set-cookie", "content-encoding", "date"],
  );
});

test("the encoder writes literals without indexing, names from the static table, no Huffman", () => {
  assert.deepEqual(encodeHeaders([[":method", "POST"]]), hex("02 04 504f5354"));
  assert.deepEqual(encodeHeaders([["te", "trailers"]]), hex("00 02 7465 08 747261696c657273"));
  // A 4-bit prefix index above 14 continues in the next octet: content-type is 31.
  assert.deepEqual(encodeHeaders([["content-type", "a"]]), hex("0f10 01 61"));
  const long = "x".repeat(300); // a length past the 7-bit prefix: 127, then 173 in two octets
  assert.deepEqual(encodeHeaders([["x-long", long]]).subarray(0, 11), hex("00 06 782d6c6f6e67 7f ad01"));
  const fields = [
    [":method", "POST"],
    [":scheme", "http"],
    [":authority", "localhost"],
    [":path", "/toolbridge.v1.ToolBridgeService/CallToolStream"],
    ["content-type", "application/grpc"],
    ["x-toolbridge-token", "tb1.abc def"],
    ["x-long", long],
  ];
  const d = decoder();
  assert.deepEqual(d.decode(encodeHeaders(fields)), fields);
  assert.equal(d.size, 0); // nothing was indexed
});

test("the encoder refuses names and values HTTP/2 metadata cannot carry", () => {
  for (const name of ["Upper", "sp ace", "", "colon:inside"]) {
    assert.throws(() => encodeHeaders([[name, "v"]]), TypeError, name);
  }
  for (const value of ["line\nbreak", "carriage\rreturn", "nul\0", " leading", "trailing ", "é"]) {
    assert.throws(() => encodeHeaders([["x-value", value]]), /cannot carry/, JSON.stringify(value));
  }
});

test("a literal never indexed and one without indexing leave the table as it was", () => {
  const d = decoder();
  assert.deepEqual(d.decode(hex("10 0a 637573746f6d2d6b6579 0d 637573746f6d2d686561646572")), [
    ["custom-key", "custom-header"],
  ]);
  assert.deepEqual(d.decode(hex("04 0c 2f73616d706c652f70617468")), [[":path", "/sample/path"]]);
  assert.equal(d.size, 0);
});

test("an entry larger than the whole table empties it and is not kept", () => {
  const d = decoder(64);
  d.decode(hex("40 01 61 01 62")); // a: b, 34 octets
  assert.equal(d.size, 34);
  const big = "v".repeat(40);
  assert.deepEqual(d.decode(Buffer.concat([hex("40 01 61 28"), Buffer.from(big)])), [["a", big]]);
  assert.deepEqual(d.entries, []);
  assert.equal(d.size, 0);
});

test("a table size update shrinks the table, evicting what no longer fits", () => {
  const d = decoder();
  d.decode(hex("40 01 61 01 62 40 01 63 01 64")); // two entries of 34 octets
  assert.equal(d.size, 68);
  assert.deepEqual(d.decode(hex("3f03 82")), [[":method", "GET"]]); // to 34: the older goes
  assert.deepEqual(d.entries, [["c", "d"]]);
  assert.deepEqual(d.decode(hex("be")), [["c", "d"]]);
});

test("the decoder refuses what breaks the RFC, saying what", () => {
  const refusals = [
    ["80", /index 0/],
    ["be", /index 62/], // the dynamic table is empty
    ["ff", /inside an integer/],
    ["ff ff ff ff ff 0f", /too large/],
    ["40 05 6162", /inside a string/],
    ["40", /before a string/],
    ["3fe21f", /above the 4096 announced/],
    ["82 20", /follows a header field/],
    ["40 81 ff 01 61", /padding|no valid code/], // eight one-bits: padding too long
    ["40 84 ffffffff 01 61", /EOS/],
  ];
  for (const [bytes, message] of refusals) {
    assert.throws(() => decoder().decode(hex(bytes)), (error) => error instanceof HpackError && message.test(error.message), bytes);
  }
  const many = Buffer.concat(Array.from({ length: 10 }, () => hex("00 01 61 08 6262626262626262")));
  assert.throws(() => decoder(4096, 80).decode(many), /more than 80 octets/);
});

test("Huffman padding: up to seven one-bits end a string, a zero bit or a whole octet does not", () => {
  assert.equal(huffmanDecoded(hex("1f")).toString(), "a"); // 00011, then 111
  assert.throws(() => huffmanDecoded(hex("1e")), /padding/); // 00011, then 110
  assert.throws(() => huffmanDecoded(hex("1fff")), /padding/); // 00011, then eleven one-bits
  assert.equal(huffmanDecoded(Buffer.alloc(0)).toString(), "");
});
