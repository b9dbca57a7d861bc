// Whether the disk has room for the warm pool's next spare. Where files are copied (no clones), the
// spares beyond --pool-size stay under a tenth of the free space, so a grown pool never eats the disk
// its tenants need; under --min-free-disk no spare is made at all (disk-guard.ts stops every refill).

/** Extra spares (beyond --pool-size) on a filesystem that copies may fill this share of the free space. */
const EXTRA_DISK_SHARE = 0.1;

/** Why a pool short of its target makes no spare now (the status document's `pool.<template>.held`). */
export type PoolHold = 'disk-low' | 'disk-share';

export interface SpareRoomOptions {
  /** --pool-size: spares within it always fit. */
  size: number;
  /** True where the data filesystem clones files: a spare then costs almost no disk. */
  clones: boolean;
  /** Bytes free on the data filesystem, or null if not known. */
  freeBytes?: () => number | null;
  /** False while the data filesystem is under --min-free-disk (disk-guard.ts). */
  hasRoom?: () => boolean;
}

export class SpareRoom {
  /** A spare's size per template generation ("name/generation"), measured on the first one made. */
  private readonly spareBytes = new Map<string, number>();

  constructor(private readonly opts: SpareRoomOptions) {}

  /** False while the disk is low: no refill runs. */
  hasRoom(): boolean {
    return this.opts.hasRoom?.() !== false;
  }

  /** A spare of this generation (`key`) is to be measured: files are copied and none was yet. */
  wantsSize(key: string): boolean {
    return !this.opts.clones && !this.spareBytes.has(key);
  }

  recordSize(key: string, bytes: number): void {
    this.spareBytes.set(key, bytes);
  }

  /** Whether one more spare of `key` fits beside `ready`: always within --pool-size, beyond it see above. */
  fits(key: string, ready: number): boolean {
    const extras = ready + 1 - this.opts.size;
    if (extras <= 0 || this.opts.clones) return true;
    const bytes = this.spareBytes.get(key);
    const free = this.opts.freeBytes?.() ?? null;
    if (bytes === undefined || free === null) return true;
    return extras * bytes <= EXTRA_DISK_SHARE * free;
  }

  /** What holds a pool with `pending` spares (ready or being made) short of `target`, or null. */
  held(key: string, pending: number, target: number): PoolHold | null {
    if (this.opts.size === 0 || pending >= target) return null;
    if (!this.hasRoom()) return 'disk-low';
    return this.fits(key, pending) ? null : 'disk-share';
  }
}
