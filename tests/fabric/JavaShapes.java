// SPDX-License-Identifier: MIT
// A JVM server and client for tests/fabric/test-servers-mixed.sh.
//
//   java JavaShapes serve ADDR PORT
//       com.sun.net.httpserver on PORT (8 worker threads) answers every
//       POST with 1 MiB and, in x-got, the length and digest of what it
//       read; a java.nio Selector echo server on PORT + 1 (one thread,
//       non-blocking channels); prints "listening"
//   java JavaShapes client ADDR PORT BIND
//       40 POSTs of 300000 bytes over blocking sockets from 20 threads,
//       one connection each; then 32 echoes of 200000 bytes from 16
//       threads, each writing from a second thread and half-closing;
//       prints "java_http ok N bad M" and "java_echo ok N bad M"
import com.sun.net.httpserver.*;
import java.io.*;
import java.net.*;
import java.nio.*;
import java.nio.channels.*;
import java.security.*;
import java.util.*;
import java.util.concurrent.*;

public class JavaShapes {
    static byte[] body(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++)
            b[i] = (byte)(i * 7 + (i >> 8));
        return b;
    }

    static String sha(byte[] b) throws Exception {
        StringBuilder s = new StringBuilder();
        for (byte x : MessageDigest.getInstance("SHA-256").digest(b))
            s.append(String.format("%02x", x));
        return s.toString();
    }

    /* A blocking socket from bind to addr:port. */
    static Socket open(String bind, String addr, int port) throws IOException {
        Socket s = new Socket();
        s.bind(new InetSocketAddress(bind, 0));
        s.connect(new InetSocketAddress(addr, port), 30000);
        s.setSoTimeout(120000);
        return s;
    }

    /* "ok N bad M" of the checks, each within 300 s. */
    static String tally(List<Future<Boolean>> checks) {
        int ok = 0, bad = 0;
        for (Future<Boolean> f : checks) {
            try {
                if (f.get(300, TimeUnit.SECONDS))
                    ok++;
                else
                    bad++;
            } catch (Exception e) {
                bad++;
                System.out.println("error " + e);
            }
        }
        return "ok " + ok + " bad " + bad;
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], addr = a[1];
        int port = Integer.parseInt(a[2]);
        if (mode.equals("serve"))
            serve(addr, port);
        else
            client(addr, port, a[3]);
    }

    static void serve(String addr, int port) throws Exception {
        byte[] big = body(1 << 20);
        HttpServer h = HttpServer.create(new InetSocketAddress(addr, port), 128);
        h.createContext("/", ex -> {
            byte[] in = ex.getRequestBody().readAllBytes();
            try {
                ex.getResponseHeaders().add("x-got", in.length + ":" + sha(in));
            } catch (Exception e) {
                throw new IOException(e);
            }
            ex.sendResponseHeaders(200, big.length);
            try (OutputStream o = ex.getResponseBody()) { o.write(big); }
        });
        h.setExecutor(Executors.newFixedThreadPool(8));
        h.start();
        // NIO echo on port+1: one selector thread.
        ServerSocketChannel ss = ServerSocketChannel.open();
        ss.bind(new InetSocketAddress(addr, port + 1), 256);
        ss.configureBlocking(false);
        Selector sel = Selector.open();
        ss.register(sel, SelectionKey.OP_ACCEPT);
        System.out.println("listening");
        Map<SocketChannel, ByteBuffer> pend = new HashMap<>();
        for (;;) {
            sel.select();
            for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext();) {
                SelectionKey k = it.next();
                it.remove();
                if (k.isAcceptable()) {
                    SocketChannel c = ss.accept();
                    if (c == null) continue;
                    c.configureBlocking(false);
                    c.register(sel, SelectionKey.OP_READ);
                    continue;
                }
                SocketChannel c = (SocketChannel)k.channel();
                ByteBuffer out = pend.get(c);
                if (k.isValid() && k.isWritable() && out != null) {
                    c.write(out);
                    if (!out.hasRemaining()) {
                        pend.remove(c);
                        k.interestOps(SelectionKey.OP_READ);
                    }
                    continue;
                }
                if (k.isValid() && k.isReadable()) {
                    ByteBuffer b = ByteBuffer.allocate(65536);
                    int n;
                    try {
                        n = c.read(b);
                    } catch (IOException e) {
                        n = -1;
                    }
                    if (n < 0) {
                        k.cancel();
                        c.close();
                        pend.remove(c);
                        continue;
                    }
                    b.flip();
                    c.write(b);
                    if (b.hasRemaining()) {
                        pend.put(c, b);
                        k.interestOps(SelectionKey.OP_WRITE);
                    }
                }
            }
        }
    }

    static void client(String addr, int port, String bind) throws Exception {
        byte[] up = new byte[300000];
        new Random(1).nextBytes(up);
        String want = sha(body(1 << 20)), wantGot = up.length + ":" + sha(up);
        ExecutorService hx = Executors.newFixedThreadPool(20);
        List<Future<Boolean>> fs = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            final int n = i;
            fs.add(hx.submit(() -> {
                try (Socket s = open(bind, addr, port)) {
                    OutputStream o = s.getOutputStream();
                    o.write(("POST /x" + n + " HTTP/1.1\r\nHost: x\r\n"
                             + "Connection: close\r\nContent-Length: "
                             + up.length + "\r\n\r\n").getBytes());
                    o.write(up);
                    o.flush();
                    byte[] all = s.getInputStream().readAllBytes();
                    String head = new String(all, 0, Math.min(all.length, 1000),
                                             "ISO-8859-1");
                    int sep = head.indexOf("\r\n\r\n");
                    if (sep < 0) return false;
                    byte[] b = Arrays.copyOfRange(all, sep + 4, all.length);
                    return sha(b).equals(want)
                        && head.toLowerCase().contains("x-got: " + wantGot);
                }
            }));
        }
        System.out.println("java_http " + tally(fs));
        hx.shutdown();
        // Blocking sockets against the NIO echo, from 16 threads.
        ExecutorService ex = Executors.newFixedThreadPool(16);
        List<Future<Boolean>> es = new ArrayList<>();
        for (int t = 0; t < 32; t++) {
            final int seed = t;
            es.add(ex.submit(() -> {
                byte[] d = new byte[200000];
                new Random(seed).nextBytes(d);
                try (Socket s = open(bind, addr, port + 1)) {
                    Thread w = new Thread(() -> {
                        try {
                            s.getOutputStream().write(d);
                            s.shutdownOutput();
                        } catch (IOException e) {
                        }
                    });
                    w.start();
                    byte[] got = s.getInputStream().readAllBytes();
                    w.join();
                    return Arrays.equals(got, d);
                }
            }));
        }
        System.out.println("java_echo " + tally(es));
        ex.shutdown();
        System.exit(0);
    }
}
