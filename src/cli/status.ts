// `pgx status`: the runtime's status document (GET /v1/status) as a compact table, or --json as is.
// Counts, not lists: its cost does not grow with the number of databases (a few milliseconds at
// 10,000). Disk use by kind reads every database's size (pg_database_size: seconds at thousands of
// databases), so it is measured only with --disk.

import type { StatusBody } from '../api/contract.js';
import { apiClient, parseCommand, positionals, TARGET_HELP } from './command-line.js';
import { count, humanDuration, printJson } from './output.js';

const STATUS_HELP = `Usage: pgx status [--disk] [options]

Shows a running runtime at a glance: process, memory, sessions, database counts (with dropped
databases whose DROP DATABASE still runs in the background, when any), warm pools per template,
mints, the janitor, and free space on the data filesystem. Reads GET /v1/status from the runtime's
HTTP API (pgx start --api-port N); \`pgx db list\` lists the databases.

  --disk    also measure disk used by templates, snapshots and databases (GET /v1/status?disk=true):
            it reads every database's size, which takes seconds at thousands of databases

${TARGET_HELP}`;

export async function runStatus(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, STATUS_HELP, { disk: { type: 'boolean' } });
  if (cmd.help) {
    process.stdout.write(STATUS_HELP);
    return 0;
  }
  positionals(cmd, [], STATUS_HELP);
  const status = await apiClient(cmd).status(cmd.values.disk === true);
  if (cmd.json) printJson(status);
  else process.stdout.write(formatStatus(status));
  return 0;
}

const num = (n: number, digits = 1): string => (Number.isInteger(n) ? String(n) : n.toFixed(digits));

/**
 * The trash backlog, when there is one: databases already dropped whose DROP DATABASE still runs in the
 * background, each holding its disk until then. A backlog that grows means drops lag behind.
 */
const dropping = (trash: number | undefined): string => (trash ? `; ${trash} dropping (DROP DATABASE in the background)` : '');

/** Why a pool below its size stays there (absent in a status from before `held`). */
function poolHeld(held: StatusBody['pool'][string]['held'] | undefined): string {
  if (held === 'disk-low') return '; refills stopped: the disk is low (free space, below)';
  if (held === 'disk-share') return '; held here: one more spare would take over a tenth of the free disk (files are copied, not cloned)';
  return '';
}

/** The status document as aligned `label  value` lines. */
export function formatStatus(s: StatusBody): string {
  const rows: [string, string][] = [
    ['runtime', `pid ${s.runtime.pid}, up ${humanDuration(s.runtime.uptime_s)}, pgx ${s.runtime.version}, PostgreSQL ${s.runtime.postgres_version} (pid ${s.runtime.postgres_pid ?? 'down'})`],
    ['memory', `PSS ${num(s.memory.pss_mb)} MB, RSS ${num(s.memory.rss_mb)} MB, ${count(s.memory.processes, 'process', 'processes')}`],
    ['sessions', `${count(s.sessions.total, 'session')} open on ${count(s.sessions.databases, 'database')}`],
    ['databases', `${s.databases.total} total, ${s.databases.ephemeral} ephemeral, ${count(s.databases.spares, 'spare')}, ${s.databases.pinned} pinned, ${count(s.databases.templates, 'template')}${dropping(s.databases.trash)}`],
  ];
  const templates = Object.keys(s.pool).sort();
  if (templates.length === 0) rows.push(['pool', 'no sealed templates']);
  for (const t of templates) {
    const p = s.pool[t]!;
    rows.push([`pool ${t}`, `${p.ready}/${p.size} ready, ${count(p.handouts, 'handout')}, ${count(p.refills, 'refill')}${poolHeld(p.held)}`]);
  }
  rows.push(
    ['mints', `${s.mints.warm} warm, ${s.mints.cold} cold, ${count(s.mints.failures, 'failure')}; latency mean ${num(s.mints.latency_ms.mean)} ms, p99 ${num(s.mints.latency_ms.p99)} ms`],
    ['janitor', `${count(s.janitor.drops, 'drop')}, last run ${s.janitor.last_run ?? 'never'}`],
    ['storage', `${s.storage.filesystem}, ${s.storage.clone ? 'copy-on-write clones' : 'no clones: databases are full copies'}`],
  );
  const d = s.limits?.disk;
  if (d && d.state !== null) {
    const note = d.state === 'ok' ? '' : d.state === 'low' ? ': new work refused' : ': new work refused, growing writes canceled';
    rows.push(['disk', `${num(d.free_mb)} MB free of ${num(d.total_mb)} MB (keeps ${num(d.min_free_mb)} MB), ${d.state}${note}; reserve ${num(d.reserve_mb)} MB; ${count(d.writes_canceled, 'write')} canceled, ${count(d.refusals, 'refusal')}`]);
  }
  const u = s.disk_usage;
  if (!u) rows.push(['disk use', 'not measured (pgx status --disk reads every database\'s size)']);
  else {
    const shared = u.clones_share_blocks ? ' (clones share blocks with their template: these overlap, used is what they cost)' : '';
    rows.push(['disk use', `templates ${num(u.templates_mb)} MB, snapshots ${num(u.snapshots_mb)} MB, databases ${num(u.databases_mb)} MB, spares ${num(u.spares_mb)} MB, other ${num(u.other_mb)} MB${shared}`]);
    rows.push(['filesystem', `${num(u.used_mb)} MB used, ${num(u.free_mb)} MB free of ${num(u.total_mb)} MB`]);
  }
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}\n`).join('');
}
