/**
 * Layout at the widths operators use (1280, 1440, 1920 and a 390 px phone): no table cell draws
 * its text past its edge, and names are cut only at a dot or with an ellipsis that has the full
 * name on hover.
 */
import type { Page } from '@playwright/test';
import { expect, expectLive, test } from './fixtures.js';

const WIDTHS = [
  { width: 1280, height: 800 },
  { width: 1440, height: 900 },
  { width: 1920, height: 1080 },
  { width: 390, height: 844 },
];

/**
 * Cells (and their header buttons) whose content is wider than the cell, except those that cut
 * their text with an ellipsis and carry the whole text in a title.
 */
async function overflowingCells(page: Page, selector: string): Promise<string[]> {
  return page.locator(selector).evaluateAll((cells) => {
    const out: string[] = [];
    for (const cell of cells) {
      const boxes = [cell, ...Array.from(cell.querySelectorAll<HTMLElement>('button, a, span'))];
      for (const box of boxes) {
        if (box.scrollWidth <= box.clientWidth + 1) continue;
        const ellipsized = getComputedStyle(box).textOverflow === 'ellipsis';
        const titled = (box.getAttribute('title') ?? box.querySelector('[title]')?.getAttribute('title') ?? '') === box.textContent?.trim();
        if (ellipsized && titled) continue;
        if (getComputedStyle(box).display === 'inline') continue; // an inline box has no width of its own
        out.push(`${cell.tagName} "${cell.textContent?.trim()}" (${box.scrollWidth} > ${box.clientWidth})`);
      }
    }
    return out;
  });
}

/**
 * Where the text of the elements matched breaks onto a new line right after a character that is
 * not a separator (". - _ / : , space"): a word cut in two. Ellipsized text with its title is fine.
 */
async function midWordBreaks(page: Page, selector: string): Promise<string[]> {
  return page.locator(selector).evaluateAll((els) => {
    const out: string[] = [];
    for (const el of els) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      let last: { char: string; top: number } | null = null;
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const text = node.textContent ?? '';
        for (let i = 0; i < text.length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rect = range.getClientRects()[0];
          if (rect === undefined) continue;
          if (last !== null && rect.top > last.top + 2 && !/[.\-_/:, ]/.test(last.char) && text[i] !== ' ') {
            out.push(`${el.textContent?.trim()}: broken after "${last.char}"`);
          }
          last = { char: text[i]!, top: rect.top };
        }
      }
    }
    return out;
  });
}

for (const viewport of WIDTHS) {
  test.describe(`at ${viewport.width}x${viewport.height}`, () => {
    test.use({ viewport });

    test('the tubes list shows every header and value whole, a paused tube’s time left included', async ({ page, tcp }) => {
      const client = await tcp();
      for (const tube of ['webhooks.shopify', 'video.transcode.priority-lane', 'mail']) {
        await client.use(tube);
        for (let i = 0; i < 3; i++) await client.put(`{"n":${i}}`);
      }
      expect(await client.command('pause-tube webhooks.shopify 7200')).toBe('PAUSED\r\n');
      await page.goto('/tubes');
      await expectLive(page);
      await expect(page.getByTestId('tube-row-webhooks.shopify').getByTestId('count-pause')).toContainText('1h 59m');
      expect(await overflowingCells(page, '[data-testid="tube-table"] th, [data-testid="tube-table"] td')).toEqual([]);
      if (viewport.width >= 1440) {
        // Every column is on screen: the list does not hide its last columns behind a sideways scroll.
        const scroller = page.getByTestId('tube-table').locator('..');
        expect(await scroller.evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
      }
    });

    test('a job’s tube and a connection’s tubes break at their dots, and 5 held jobs read as a count with links', async ({ page, tcp }) => {
      const tube = 'webhooks.shopify.orders-create.retries';
      const worker = await tcp();
      await worker.use(tube);
      await worker.watch(tube);
      await worker.watch('video.transcode.priority-lane');
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) ids.push(await worker.put(`{"n":${i}}`));
      for (let i = 0; i < 5; i++) await worker.reserve();

      await page.goto(`/jobs/${ids[0]}`);
      await expectLive(page);
      await expect(page.getByTestId('job-field-tube')).toContainText('shopify');
      expect(await midWordBreaks(page, '[data-testid="job-field-tube"]')).toEqual([]);

      await page.goto('/connections');
      await expectLive(page);
      const holding = page.locator('[data-testid^="conn-holding-"][data-value="5"]');
      await expect(holding.getByTestId('held-count')).toHaveText('5 jobs');
      const link = holding.getByTestId('held-tube-link');
      await expect(link).toHaveAttribute('href', `/tubes/${encodeURIComponent(tube)}?state=reserved`);
      if (process.env.LAYOUT_SHOTS) await page.screenshot({ path: `/tmp/conn-${viewport.width}.png` });
      await expect(holding.locator('a[href^="/jobs/"]')).toHaveCount(0);
      expect(await midWordBreaks(page, '[data-testid="connections-table"] td')).toEqual([]);
    });
  });
}

test('a job row says its reserves, releases, buries and kicks as labelled counts, leaving out the zeros', async ({ page, tcp }) => {
  const worker = await tcp();
  await worker.use('counted');
  await worker.watchOnly('counted');
  const id = await worker.put('{"n":1}');
  await worker.reserve();
  await worker.release(id);
  await worker.reserve();
  await worker.bury(id);
  expect(await worker.command(`kick-job ${id}`)).toBe('KICKED\r\n');
  await page.goto('/tubes/counted');
  await expectLive(page);
  const counters = page.getByTestId(`job-counters-${id}`);
  await expect(counters).toHaveText('2 reserves, 1 release, 1 bury, 1 kick');
  await expect(counters.locator('[data-counter="reserves"]')).toHaveAttribute('data-value', '2');
  await expect(page.getByTestId('job-table').getByRole('columnheader', { name: 'History' })).toBeVisible();
});
