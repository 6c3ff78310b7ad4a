// SPDX-License-Identifier: MIT
// An HTTP server and client in Node.js for tests/fabric/test-servers.sh.
//
//   node node_http.js serve ADDR PORT WORKERS
//       answers every POST with a 1 MiB body and, in x-got, the length
//       and digest of what it read; WORKERS > 0 runs Node's cluster module
//       (the primary accepts every connection and passes it to a worker);
//       prints "listening" once every worker listens
//   node node_http.js client ADDR PORT CONC TOTAL BIND
//       TOTAL POSTs of 300 KB from BIND, CONC at a time, one connection
//       each; prints "node_client ok N bad M"
'use strict';
const cluster = require('cluster');
const crypto = require('crypto');
const http = require('http');

const digest = (b) => crypto.createHash('sha256').update(b).digest('hex');
const body = Buffer.alloc(1 << 20);
for (let i = 0; i < body.length; i++)
  body[i] = (i * 7 + (i >> 8)) & 255;

function serve(addr, port, workers) {
  if (workers > 0 && cluster.isPrimary) {
    let up = 0;
    for (let i = 0; i < workers; i++)
      cluster.fork();
    cluster.on('listening', () => {
      if (++up === workers)
        console.log('listening');
    });
    return;
  }
  http.createServer((req, res) => {
    const h = crypto.createHash('sha256');
    let n = 0;
    req.on('data', (d) => { n += d.length; h.update(d); });
    req.on('end', () => {
      res.setHeader('x-got', n + ':' + h.digest('hex'));
      res.end(body);
    });
  }).listen(port, addr, () => {
    if (!workers)
      console.log('listening');
  });
}

function client(addr, port, conc, total, bind) {
  const up = crypto.randomBytes(300000);
  const wantGot = up.length + ':' + digest(up);
  const want = digest(body);
  let started = 0, done = 0, ok = 0, bad = 0;

  const finished = () => {
    if (++done === total) {
      console.log(`node_client ok ${ok} bad ${bad}`);
      process.exit(bad ? 1 : 0);
    }
    one();
  };
  const one = () => {
    if (started >= total)
      return;
    started++;
    const req = http.request({ host: addr, port, method: 'POST',
                               localAddress: bind,
                               agent: new http.Agent({ keepAlive: false }) },
                             (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        if (digest(Buffer.concat(parts)) === want &&
            res.headers['x-got'] === wantGot)
          ok++;
        else
          bad++;
        finished();
      });
    });
    req.on('error', (e) => {
      console.log('error ' + e.message);
      bad++;
      finished();
    });
    req.end(up);
  };
  for (let i = 0; i < conc; i++)
    one();
}

const [mode, addr, port, ...rest] = process.argv.slice(2);
if (mode === 'serve')
  serve(addr, +port, +rest[0]);
else
  client(addr, +port, +rest[0], +rest[1], rest[2]);
