// Preloaded (NODE_OPTIONS=--require) into child processes a test runs, such as the CDK CLI and the
// app it starts: their network is locked to loopback. A name lookup other than localhost is answered
// ENOTFOUND without a query, a connection to a non-loopback address is refused before the real
// connect runs, and each attempt is appended to the file LOOPBACK_ONLY_LOG names, for the test to read.
'use strict';
const dns = require('node:dns');
const fs = require('node:fs');
const net = require('node:net');

const log = process.env.LOOPBACK_ONLY_LOG;
const record = (what) => {
  if (log) fs.appendFileSync(log, `${process.pid} ${what}\n`);
};
const isLoopback = (address) => address === '::1' || /^127\./.test(address) || /^::ffff:127\./i.test(address);
const allowedName = (name) => name === 'localhost' || isLoopback(name);
const notFound = (hostname) =>
  Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname} (loopback-only test network)`), { code: 'ENOTFOUND', hostname });

const realLookup = dns.lookup;
dns.lookup = function lookup(hostname, options, callback) {
  const done = typeof options === 'function' ? options : callback;
  if (allowedName(hostname)) return realLookup.call(dns, hostname, options, callback);
  record(`lookup ${hostname}`);
  process.nextTick(done, notFound(hostname));
  return {};
};
const realPromiseLookup = dns.promises.lookup;
dns.promises.lookup = async function lookup(hostname, options) {
  if (allowedName(hostname)) return realPromiseLookup.call(dns.promises, hostname, options);
  record(`lookup ${hostname}`);
  throw notFound(hostname);
};

const realConnect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function connect(...args) {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const options =
    typeof first === 'object' && first !== null ? first : { port: first, host: typeof args[1] === 'string' ? args[1] : 'localhost' };
  const host = options.host ?? 'localhost';
  // A `path` makes it a pipe (IPC), not TCP; HTTP agents pass it as null.
  if (!options.path && net.isIP(host) !== 0 && !isLoopback(host)) {
    record(`connect ${host}:${options.port}`);
    const error = Object.assign(new Error(`connect EACCES ${host} (loopback-only test network)`), { code: 'EACCES' });
    process.nextTick(() => this.destroy(error));
    return this;
  }
  return realConnect.apply(this, args);
};
