// A foreign libp2p node for sark-node's interop tests: js-libp2p, nothing of ours.
//
//   node gate.mjs gate [--refuse-providers]
//       A gate: kad-dht server on /sark/kad/1.0.0 and a circuit relay v2 server, listening on
//       127.0.0.1 on a port the kernel picks. Prints {"event":"ready","addrs":[...]} once it
//       listens, then runs until stdin closes or a signal comes. --refuse-providers makes it
//       refuse every ADD_PROVIDER (as a kad-dht server refuses keys it cannot read).
//   node gate.mjs find GATE_ADDR HEX_DIGEST...
//       A standard kad-dht client: dials the gate and asks for the providers of each key, given as
//       the hex sha256 digest of a capability string (looked up as a CIDv1, raw codec, i.e. its
//       multihash 0x12 0x20 + digest on the wire). Prints one {"event":"providers",...} line per
//       key, then exits 0.
//
// Every line on stdout is one JSON object; diagnostics go to stderr.

import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { circuitRelayServer } from '@libp2p/circuit-relay-v2'
import { identify } from '@libp2p/identify'
import { kadDHT, passthroughMapper } from '@libp2p/kad-dht'
import { ping } from '@libp2p/ping'
import { tcp } from '@libp2p/tcp'
import { multiaddr } from '@multiformats/multiaddr'
import { createLibp2p } from 'libp2p'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'

const KAD = '/sark/kad/1.0.0'
const RAW = 0x55
const SHA2_256 = 0x12

function emit (event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

function dht (clientMode) {
  return kadDHT({
    protocol: KAD,
    clientMode,
    // js kad-dht drops loopback addresses by default: the tests run on 127.0.0.1 only.
    peerInfoMapper: passthroughMapper,
    allowQueryWithZeroPeers: true
  })
}

async function gate (refuseProviders) {
  const node = await createLibp2p({
    addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services: {
      identify: identify(),
      ping: ping(),
      dht: dht(false),
      relay: circuitRelayServer({
        reservations: { maxReservations: 64, defaultDataLimit: 16n << 20n, defaultDurationLimit: 300_000 }
      })
    }
  })
  if (refuseProviders) {
    node.services.dht.providers.addProvider = async () => {
      throw new Error('refused by --refuse-providers')
    }
  }
  emit({ event: 'ready', peer_id: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) })
  const stop = async () => {
    await node.stop()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  process.stdin.on('end', stop)
  process.stdin.resume()
}

async function find (gateAddr, hexDigests) {
  const node = await createLibp2p({
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services: { identify: identify(), ping: ping(), dht: dht(true) }
  })
  const table = node.services.dht.routingTable
  const added = new Promise((resolve) => table.addEventListener('peer:add', resolve, { once: true }))
  await node.dial(multiaddr(gateAddr))
  // A query started before identify has put the gate in the routing table asks nobody.
  if (table.size === 0) {
    await Promise.race([added, new Promise((_resolve, reject) => {
      setTimeout(() => reject(new Error('the gate never joined the routing table (no kad on identify?)')), 10_000)
    })])
  }
  for (const hex of hexDigests) {
    const cid = CID.createV1(RAW, Digest.create(SHA2_256, Uint8Array.from(Buffer.from(hex, 'hex'))))
    const found = new Map()
    const signal = AbortSignal.timeout(10_000)
    for await (const provider of node.contentRouting.findProviders(cid, { signal })) {
      found.set(provider.id.toString(), provider.multiaddrs.map(String))
    }
    emit({ event: 'providers', key: hex, cid: cid.toString(), providers: Object.fromEntries(found) })
  }
  await node.stop()
}

const [mode, ...args] = process.argv.slice(2)
try {
  if (mode === 'gate') {
    await gate(args.includes('--refuse-providers'))
  } else if (mode === 'find' && args.length >= 2) {
    await find(args[0], args.slice(1))
    process.exit(0)
  } else {
    process.stderr.write('usage: gate.mjs gate [--refuse-providers] | find GATE_ADDR HEX_DIGEST...\n')
    process.exit(2)
  }
} catch (err) {
  process.stderr.write(`gate.mjs ${mode}: ${err.stack ?? err}\n`)
  process.exit(1)
}
