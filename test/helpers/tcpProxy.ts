import net from 'node:net';

/**
 * A TCP proxy to `target` that a test can freeze (connections stay open and nothing passes) or
 * take down (connections are cut and new ones refused, as when the server stops).
 */
export interface TcpProxy {
  port: number;
  /** Stops forwarding both ways (as a hung server or a network dropping packets would). */
  freeze(): void;
  thaw(): void;
  /** Forwards what clients send but holds the server's replies (a server that took a statement and stopped answering). */
  holdReplies(): void;
  /** Ends every open connection (a network or server dropping them); new ones are forwarded. */
  cut(): void;
  /**
   * Drops every connection and stops listening (as a server that is down): a new connection is
   * refused (ECONNREFUSED) until `up()`.
   */
  down(): Promise<void>;
  /** Listens again, on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<[net.Socket, net.Socket]>();
  let frozen = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    if (frozen) {
      client.pause();
      upstream.pause();
    }
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const dropAll = () => {
    for (const [a, b] of pairs) {
      a.destroy();
      b.destroy();
    }
  };
  const stopListening = () =>
    new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  return {
    port,
    freeze() {
      frozen = true;
      for (const [a, b] of pairs) {
        a.pause();
        b.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const [a, b] of pairs) {
        a.resume();
        b.resume();
      }
    },
    holdReplies() {
      for (const [, upstream] of pairs) upstream.pause();
    },
    cut() {
      dropAll();
    },
    async down() {
      const closed = stopListening();
      dropAll();
      await closed;
    },
    async up() {
      if (!server.listening) await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    },
    async close() {
      const closed = stopListening();
      dropAll();
      await closed;
    },
  };
}
