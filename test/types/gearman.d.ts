/** The npm `gearman` package (node-gearman 2.x), as the client tests use it. */
declare module 'gearman' {
  interface GearmanJob {
    handle: string;
    func_name: string;
    payload: Buffer;
  }
  interface GearmanStatus {
    handle: string;
    known: string;
    running: string;
    percent_done_num: string;
    percent_done_den: string;
  }
  interface SubmitOptions {
    background?: boolean;
    priority?: 'low' | 'normal' | 'high';
    unique_id?: string;
  }
  interface GearmanConnection {
    connect(callback: () => void): void;
    close(): void;
    submitJob(func: string, data: string | Buffer, options?: SubmitOptions): void;
    getJobStatus(handle: string): void;
    addFunction(func: string, timeout?: number): void;
    preSleep(): void;
    grabJob(): void;
    sendWorkStatus(handle: string, numerator: string, denominator: string): void;
    sendWorkData(handle: string, data: string | Buffer): void;
    sendWorkComplete(handle: string, data: string | Buffer): void;
    on(event: 'JOB_CREATED', listener: (handle: string) => void): void;
    on(event: 'JOB_ASSIGN', listener: (job: GearmanJob) => void): void;
    on(event: 'WORK_COMPLETE' | 'WORK_DATA', listener: (job: { handle: string; payload: Buffer }) => void): void;
    on(event: 'STATUS_RES', listener: (status: GearmanStatus) => void): void;
    on(event: 'NOOP', listener: () => void): void;
    on(event: 'error', listener: (err: Error) => void): void;
  }
  function gearman(host?: string, port?: number, options?: { timeout?: number }): GearmanConnection;
  export = gearman;
}
