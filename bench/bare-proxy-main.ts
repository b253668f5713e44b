import { startBareProxy } from './bare-proxy.ts';

const upstream = process.env.UPSTREAM_URL;
if (!upstream) throw new Error('UPSTREAM_URL is required');
const proxy = await startBareProxy(upstream, Number(process.env.PORT ?? 0));
process.stdout.write(`${JSON.stringify({ url: proxy.url })}\n`);
process.on('SIGTERM', () => void proxy.close().then(() => process.exit(0)));
