-- Plugging xmpp-queue into Prosody (0.12): add this to /etc/prosody/prosody.cfg.lua
-- (or a file in /etc/prosody/conf.d/), then `prosodyctl reload`.
--
-- xmpp-queue is an external component (XEP-0114): Prosody routes every stanza
-- addressed to queue.example.org to it over one TCP connection on the component
-- port, and the component answers as that domain.

---------- global section (before any VirtualHost) ----------

-- The component port. Keep it on loopback (or a private network): the component
-- stream is not encrypted, and the secret is all that authenticates it.
component_ports = { 5347 }
component_interfaces = { "127.0.0.1" }

-- A queue moves many small stanzas; with Nagle's algorithm each one may wait for
-- the previous ACK (tens of ms per hop). Turn it off for lower latency.
network_settings = {
	nagle = false;
}

-- Lua 5.4's generational garbage collector: Prosody then spends about 40% less CPU
-- per stanza (measured with bench/queue_throughput.py: 1.31 -> 0.80 ms per work item).
gc = { mode = "generational" }

-- Stanza size limits: 256 KiB from clients (c2s), 512 KiB on the component
-- stream by default. A publish carries the payload plus its envelope, so with
-- [queue] max_payload_size = 262144 (the default) raise the client limit a
-- little, or lower max_payload_size:
c2s_stanza_size_limit = 1024 * 512
-- component_stanza_size_limit = 1024 * 512  -- raise with bigger payloads

-- High availability (standbys on PostgreSQL): the process that takes the lease
-- replaces the stream of an old one that hung (paused, cut off) instead of being
-- refused with "Component already connected" until the old one wakes up. It must
-- stand here, in the global section: written after a VirtualHost line it would
-- apply to that host only, and the component would keep the default (kick_new).
component_conflict_resolve = "kick_old"

---------- the users' host ----------

VirtualHost "example.org"

---------- the queue service ----------

-- The name must equal [component] jid in config.toml,
-- and the secret [component] secret.
Component "queue.example.org"
	component_secret = "change-me"

-- Notes:
-- * Workers send directed presence to queue.example.org; Prosody then tells the
--   component when a worker goes offline, and the component hands its items to
--   other workers at once instead of waiting for the lock timeout.
-- * Prosody accepts one connection per component name. Standby processes (high
--   availability on PostgreSQL) do not connect until they hold the lease;
--   component_conflict_resolve (global section, above) lets the new active
--   process replace the stream of an old one that hung instead of being
--   refused (conflict) until it wakes up. The tests
--   run this file's global section and component settings (tests/integration),
--   so a change here that breaks take-over fails them.
-- * A wrong secret is refused with <not-authorized/>; xmpp-queue then logs one
--   line (event=handshake_rejected) and exits with status 1 instead of retrying.
