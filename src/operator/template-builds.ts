// The template builds this operator made, per Template (by uid) and pod: for which spec generation,
// and which runtime generation of the template that build produced (or the build's error). A pass
// decides whether a pod is up to date from this as well as from the Template's status, because the
// status it read may predate its own write, and that write may have been refused (409) by a change
// someone else made meanwhile. Without it, each conflict meant a pass that saw no build for the new
// generation and built again (replace: true), and an imported Template ran pg_dump again: 72 rebuilds
// in 20 s were seen on two pods with nothing changing. One build per spec generation per pod.
//
// Held in memory: a new leader starts without it and trusts the status alone, which costs at most one
// rebuild per pod of a Template whose status write the old leader never made.

export type Build = { generation: number; templateGeneration: number } | { generation: number; failed: string };

export class TemplateBuilds {
  private readonly builds = new Map<string, Build>();

  record(templateUid: string, pod: string, build: Build): void {
    this.builds.set(`${templateUid}/${pod}`, build);
  }

  /** The build made here for `generation` on `pod`, if any. */
  get(templateUid: string, pod: string, generation: number): Build | undefined {
    const b = this.builds.get(`${templateUid}/${pod}`);
    return b?.generation === generation ? b : undefined;
  }

  /** The Template is gone: its builds need no remembering. */
  forget(templateUid: string): void {
    for (const key of this.builds.keys()) if (key.startsWith(`${templateUid}/`)) this.builds.delete(key);
  }
}
