/**
 * One page of a tube's jobs in one state, and the cursor of the next page (null: no more), with
 * the job as the layer hands it out (the engine's record, a store's snapshot).
 */
export interface JobPage<J> {
  jobs: J[];
  next: string | null;
}
