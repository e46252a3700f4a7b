// The sidebar's sections: pinned chats, then the others by the day they were started (the list's order),
// in the reader's own time zone.
import type { SessionListItem } from "./chatsync";

export interface Group {
  label: "Pinned" | "Today" | "Yesterday" | "Previous 7 days" | "Older";
  items: SessionListItem[];
}

/** Sessions in list order (pinned first, then newest first) cut into labelled sections; empty ones left out. */
export function groupSessions(items: readonly SessionListItem[], now = new Date()): Group[] {
  // Midnights by the calendar, not by 24 hours: a day with a daylight-saving change is 23 or 25 hours long.
  const midnight = (daysBack: number) => new Date(now.getFullYear(), now.getMonth(), now.getDate() - daysBack).getTime();
  const [today, yesterday, weekAgo] = [midnight(0), midnight(1), midnight(7)];
  const groups: Group[] = [
    { label: "Pinned", items: [] },
    { label: "Today", items: [] },
    { label: "Yesterday", items: [] },
    { label: "Previous 7 days", items: [] },
    { label: "Older", items: [] },
  ];
  for (const s of items) {
    const at = s.createdAt;
    const i = s.pinned ? 0 : at >= today ? 1 : at >= yesterday ? 2 : at >= weekAgo ? 3 : 4;
    groups[i]!.items.push(s);
  }
  return groups.filter((g) => g.items.length > 0);
}
